//! Just enough of ONNX to take the weights out of a quantised BERT export.
//!
//! The Rampart model ships as an ONNX graph whose linear layers are `MatMulNBits` nodes (4-bit blocks
//! with one f32 scale per block) and whose embedding tables are `uint8` tensors read through
//! `DequantizeLinear`. We do not run the graph: we read its initializers and the `MatMulNBits` nodes
//! (a few protobuf fields, decoded by hand below) and name each weight the way a PyTorch BERT names
//! it (`bert.encoder.layer.0.attention.self.query.weight`). The 4-bit matrices are handed on as their
//! levels and block scales ([`Graph::block_weights`], kept quantised by `opc-infer`), the 8-bit word
//! table as its bytes ([`Graph::u8_table`]), the rest as f32 ([`Graph::weights`]).

use std::collections::HashMap;

/// A decoding error (the file is not the ONNX we expect).
#[derive(Debug)]
pub struct OnnxError(pub String);

impl std::fmt::Display for OnnxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "model graph: {}", self.0)
    }
}

impl std::error::Error for OnnxError {}

fn err<T>(msg: impl Into<String>) -> Result<T, OnnxError> {
    Err(OnnxError(msg.into()))
}

/// A protobuf field: its number and value.
enum Value<'a> {
    Varint(u64),
    Fixed64,
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// Iterates over the fields of one protobuf message.
struct Fields<'a> {
    buf: &'a [u8],
}

fn varint(buf: &mut &[u8]) -> Result<u64, OnnxError> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let Some((&b, rest)) = buf.split_first() else {
            return err("truncated varint");
        };
        *buf = rest;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    err("varint too long")
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), OnnxError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        Some(self.step())
    }
}

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    fn step(&mut self) -> Result<(u32, Value<'a>), OnnxError> {
        let key = varint(&mut self.buf)?;
        let field = u32::try_from(key >> 3).map_err(|_| OnnxError("bad field number".into()))?;
        let value = match key & 7 {
            0 => Value::Varint(varint(&mut self.buf)?),
            1 => {
                if self.buf.len() < 8 {
                    return err("truncated fixed64");
                }
                self.buf = &self.buf[8..];
                Value::Fixed64
            }
            2 => {
                let len = usize::try_from(varint(&mut self.buf)?).unwrap_or(usize::MAX);
                if self.buf.len() < len {
                    return err("truncated field");
                }
                let (bytes, rest) = self.buf.split_at(len);
                self.buf = rest;
                Value::Bytes(bytes)
            }
            5 => {
                if self.buf.len() < 4 {
                    return err("truncated fixed32");
                }
                let (bytes, rest) = self.buf.split_at(4);
                self.buf = rest;
                Value::Fixed32(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
            }
            w => return err(format!("unsupported wire type {w}")),
        };
        Ok((field, value))
    }
}

fn string(bytes: &[u8]) -> Result<String, OnnxError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| OnnxError("a name is not UTF-8".into()))
}

/// An initializer: shape, element type and bytes (borrowed from the file).
pub struct Initializer<'a> {
    /// Dimensions.
    pub dims: Vec<usize>,
    /// ONNX `TensorProto.DataType` (1 float, 2 uint8, 3 int8).
    pub data_type: i32,
    raw: &'a [u8],
    floats: Vec<f32>,
    /// `int32_data`: where small integer tensors (8-bit zero points) are stored when not raw.
    ints: Vec<u8>,
}

impl Initializer<'_> {
    fn len(&self) -> usize {
        self.dims.iter().product()
    }

    /// The values as f32 (only for float tensors).
    pub fn f32s(&self) -> Result<Vec<f32>, OnnxError> {
        if self.data_type != 1 {
            return err(format!(
                "expected a float tensor, got type {}",
                self.data_type
            ));
        }
        let out: Vec<f32> = if self.raw.is_empty() {
            self.floats.clone()
        } else {
            self.raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        };
        if out.len() != self.len() {
            return err("float tensor of the wrong size");
        }
        Ok(out)
    }

    /// The bytes of an 8-bit tensor.
    pub fn bytes(&self) -> Result<&[u8], OnnxError> {
        let bytes = if self.raw.is_empty() {
            &self.ints[..]
        } else {
            self.raw
        };
        if !matches!(self.data_type, 2 | 3) || bytes.len() != self.len() {
            return err("expected an 8-bit tensor");
        }
        Ok(bytes)
    }
}

/// A graph node: op type, name, inputs and integer attributes.
pub struct Node {
    /// Node name.
    pub name: String,
    /// Operator.
    pub op_type: String,
    /// Input value names.
    pub inputs: Vec<String>,
    /// Integer attributes.
    pub ints: HashMap<String, i64>,
}

/// The parts of a model we read.
pub struct Graph<'a> {
    /// Initializers by name.
    pub initializers: HashMap<String, Initializer<'a>>,
    /// Nodes in graph order.
    pub nodes: Vec<Node>,
}

fn packed_or_single(value: Value<'_>, out: &mut Vec<usize>) -> Result<(), OnnxError> {
    match value {
        Value::Varint(v) => out.push(usize::try_from(v).unwrap_or(usize::MAX)),
        Value::Bytes(mut b) => {
            while !b.is_empty() {
                out.push(usize::try_from(varint(&mut b)?).unwrap_or(usize::MAX));
            }
        }
        _ => return err("bad dims"),
    }
    Ok(())
}

fn tensor(buf: &[u8]) -> Result<(String, Initializer<'_>), OnnxError> {
    let mut name = String::new();
    let mut init = Initializer {
        dims: Vec::new(),
        data_type: 0,
        raw: &[],
        floats: Vec::new(),
        ints: Vec::new(),
    };
    for field in Fields::new(buf) {
        match field? {
            (1, v) => packed_or_single(v, &mut init.dims)?,
            (2, Value::Varint(t)) => init.data_type = i32::try_from(t).unwrap_or(-1),
            (4, Value::Bytes(b)) => init.floats.extend(
                b.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            ),
            (4, Value::Fixed32(bits)) => init.floats.push(f32::from_bits(bits)),
            // 8-bit values stored one per int32 (truncation to the low byte is the encoding).
            (5, Value::Varint(v)) => init.ints.push(v as u8),
            (5, Value::Bytes(mut b)) => {
                while !b.is_empty() {
                    init.ints.push(varint(&mut b)? as u8);
                }
            }
            (8, Value::Bytes(b)) => name = string(b)?,
            (9, Value::Bytes(b)) => init.raw = b,
            (14, Value::Varint(1)) => return err("external tensor data is not supported"),
            _ => {}
        }
    }
    Ok((name, init))
}

fn node(buf: &[u8]) -> Result<Node, OnnxError> {
    let mut node = Node {
        name: String::new(),
        op_type: String::new(),
        inputs: Vec::new(),
        ints: HashMap::new(),
    };
    for field in Fields::new(buf) {
        match field? {
            (1, Value::Bytes(b)) => node.inputs.push(string(b)?),
            (3, Value::Bytes(b)) => node.name = string(b)?,
            (4, Value::Bytes(b)) => node.op_type = string(b)?,
            (5, Value::Bytes(attr)) => {
                let (mut name, mut int) = (String::new(), None);
                for f in Fields::new(attr) {
                    match f? {
                        (1, Value::Bytes(b)) => name = string(b)?,
                        // int64 travels as a two's-complement varint.
                        (3, Value::Varint(v)) => int = Some(v as i64),
                        _ => {}
                    }
                }
                if let Some(v) = int {
                    node.ints.insert(name, v);
                }
            }
            _ => {}
        }
    }
    Ok(node)
}

/// Read the initializers and nodes of an ONNX model file's bytes.
pub fn parse(model: &[u8]) -> Result<Graph<'_>, OnnxError> {
    let mut graph = None;
    for field in Fields::new(model) {
        if let (7, Value::Bytes(b)) = field? {
            graph = Some(b);
        }
    }
    let Some(graph_bytes) = graph else {
        return err("no graph");
    };
    let mut out = Graph {
        initializers: HashMap::new(),
        nodes: Vec::new(),
    };
    for field in Fields::new(graph_bytes) {
        match field? {
            (1, Value::Bytes(b)) => out.nodes.push(node(b)?),
            (5, Value::Bytes(b)) => {
                let (name, init) = tensor(b)?;
                out.initializers.insert(name, init);
            }
            _ => {}
        }
    }
    Ok(out)
}

/// An 8-bit table kept 8-bit: value = `(q - zero) * scale`.
pub struct U8Table {
    /// The levels, row-major.
    pub bytes: Vec<u8>,
    /// Shape.
    pub shape: Vec<usize>,
    /// Scale.
    pub scale: f32,
    /// Zero point.
    pub zero: f32,
}

impl Graph<'_> {
    /// The unsigned 8-bit table `name` (`bert.embeddings.word_embeddings.weight`), when the model
    /// stores it so.
    pub fn u8_table(&self, name: &str) -> Option<U8Table> {
        let init = self.initializers.get(&format!("{name}_quantized"))?;
        let scale = *self
            .initializers
            .get(&format!("{name}_scale"))?
            .f32s()
            .ok()?
            .first()?;
        let zero = *self
            .initializers
            .get(&format!("{name}_zero_point"))?
            .bytes()
            .ok()?
            .first()?;
        if init.data_type != 2 {
            return None;
        }
        Some(U8Table {
            bytes: init.bytes().ok()?.to_vec(),
            shape: init.dims.clone(),
            scale,
            zero: f32::from(zero),
        })
    }
}

/// `/bert/encoder/layer.0/attention/self/query/MatMul_Q4` → `bert.encoder.layer.0.attention.self.query.weight`.
fn weight_name(node: &str) -> String {
    node.trim_start_matches('/')
        .trim_end_matches("/MatMul_Q4")
        .replace('/', ".")
        + ".weight"
}

/// A dequantised weight: row-major values and shape.
pub struct Weight {
    /// Values.
    pub data: Vec<f32>,
    /// Shape.
    pub shape: Vec<usize>,
}

/// A `MatMulNBits` weight as signed levels and f32 block scales, exactly as the file has it:
/// value `[row][col]` = `levels[row * k + col] * scales[row * k / block + col / block]`.
pub struct BlockWeight {
    /// Output features.
    pub n: usize,
    /// Input features.
    pub k: usize,
    /// Values per block.
    pub block: usize,
    /// `q − zero point`, each in `-15..=15`.
    pub levels: Vec<i8>,
    /// One per (row, block).
    pub scales: Vec<f32>,
}

impl Graph<'_> {
    /// Every 4-bit `MatMulNBits` weight whose blocks are whole (`K` a multiple of the block size),
    /// as levels and scales, under the names of [`Self::weights`]. Nothing is rounded.
    pub fn block_weights(&self) -> Result<HashMap<String, BlockWeight>, OnnxError> {
        let mut out = HashMap::new();
        for node in self.nodes.iter().filter(|n| n.op_type == "MatMulNBits") {
            let int = |k: &str| node.ints.get(k).and_then(|&v| usize::try_from(v).ok());
            let (Some(k), Some(n), Some(4), Some(block)) =
                (int("K"), int("N"), int("bits"), int("block_size"))
            else {
                continue;
            };
            if block == 0 || block % 2 != 0 || k % block != 0 {
                continue;
            }
            let (Some(b_name), Some(s_name)) = (node.inputs.get(1), node.inputs.get(2)) else {
                continue;
            };
            let packed = self.get(b_name)?.bytes()?;
            let scales = self.get(s_name)?.f32s()?;
            let blocks = k / block;
            if packed.len() != n * blocks * block / 2 || scales.len() != n * blocks {
                return err(format!(
                    "{}: packed sizes do not match K={k} N={n}",
                    node.name
                ));
            }
            let zero_points = match node.inputs.get(3).filter(|s| !s.is_empty()) {
                Some(z) => Some(self.get(z)?.bytes()?),
                None => None,
            };
            let zp_stride = blocks.div_ceil(2);
            let mut levels = Vec::with_capacity(n * k);
            for row in 0..n {
                for b in 0..blocks {
                    let zp = match zero_points {
                        Some(z) => {
                            let byte = z.get(row * zp_stride + b / 2).copied().unwrap_or(0x88);
                            (if b % 2 == 0 { byte & 0x0f } else { byte >> 4 }) as i8
                        }
                        None => 8,
                    };
                    let bytes = &packed[(row * blocks + b) * block / 2..][..block / 2];
                    for byte in bytes {
                        levels.push((byte & 0x0f) as i8 - zp);
                        levels.push((byte >> 4) as i8 - zp);
                    }
                }
            }
            out.insert(
                weight_name(&node.name),
                BlockWeight {
                    n,
                    k,
                    block,
                    levels,
                    scales,
                },
            );
        }
        Ok(out)
    }
}

impl Graph<'_> {
    fn get(&self, name: &str) -> Result<&Initializer<'_>, OnnxError> {
        match self.initializers.get(name) {
            Some(i) => Ok(i),
            None => err(format!("no initializer {name}")),
        }
    }

    /// Every weight of the model, dequantised to f32, under PyTorch BERT names:
    /// float initializers as they are, `*_quantized` 8-bit tables through their scale and zero point,
    /// and each `MatMulNBits` node's 4-bit matrix as the `[out, in]` weight of a linear layer named
    /// after the node (`/bert/encoder/layer.0/attention/self/query/MatMul_Q4` →
    /// `bert.encoder.layer.0.attention.self.query.weight`).
    /// Names in `skip` (weights taken in another form) are left out.
    pub fn weights<T>(
        &self,
        skip: &HashMap<String, T>,
    ) -> Result<HashMap<String, Weight>, OnnxError> {
        let mut out = HashMap::new();
        for (name, init) in &self.initializers {
            if init.data_type == 1 && !name.ends_with("_scale") && !name.ends_with("_scales") {
                out.insert(
                    name.clone(),
                    Weight {
                        data: init.f32s()?,
                        shape: init.dims.clone(),
                    },
                );
            } else if let Some(base) = name.strip_suffix("_quantized") {
                let scale = self.get(&format!("{base}_scale"))?.f32s()?;
                let zero = self.get(&format!("{base}_zero_point"))?;
                let (Some(&scale), Some(&zp)) = (scale.first(), zero.bytes()?.first()) else {
                    return err(format!("{base}: per-tensor scale and zero point expected"));
                };
                let signed = init.data_type == 3;
                let level = |b: u8| {
                    if signed {
                        f32::from(b as i8)
                    } else {
                        f32::from(b)
                    }
                };
                let zp = level(zp);
                let data = init
                    .bytes()?
                    .iter()
                    .map(|&q| (level(q) - zp) * scale)
                    .collect();
                out.insert(
                    base.to_string(),
                    Weight {
                        data,
                        shape: init.dims.clone(),
                    },
                );
            }
        }
        for node in self.nodes.iter().filter(|n| n.op_type == "MatMulNBits") {
            let name = weight_name(&node.name);
            if !skip.contains_key(&name) {
                out.insert(name, self.matmul_nbits(node)?);
            }
        }
        Ok(out)
    }

    /// Dequantise one `MatMulNBits` node's B: `[N, blocks, block_size/2]` packed 4-bit values, low
    /// nibble first, one scale per (row, block), zero point 8 unless given. Returns `[N, K]`.
    fn matmul_nbits(&self, node: &Node) -> Result<Weight, OnnxError> {
        let attr = |k: &str| -> Result<usize, OnnxError> {
            match node.ints.get(k).and_then(|&v| usize::try_from(v).ok()) {
                Some(v) => Ok(v),
                None => err(format!("{}: attribute {k} missing", node.name)),
            }
        };
        let (k, n, bits, block) = (attr("K")?, attr("N")?, attr("bits")?, attr("block_size")?);
        if bits != 4 || block == 0 || block % 2 != 0 {
            return err(format!("{}: only 4-bit blocks are supported", node.name));
        }
        let (Some(b_name), Some(s_name)) = (node.inputs.get(1), node.inputs.get(2)) else {
            return err(format!("{}: inputs missing", node.name));
        };
        let packed = self.get(b_name)?.bytes()?;
        let scales = self.get(s_name)?.f32s()?;
        let blocks = k.div_ceil(block);
        let blob = block / 2;
        let zero_points = match node.inputs.get(3).filter(|s| !s.is_empty()) {
            Some(z) => Some(self.get(z)?.bytes()?),
            None => None,
        };
        if packed.len() != n * blocks * blob || scales.len() != n * blocks {
            return err(format!(
                "{}: packed sizes do not match K={k} N={n}",
                node.name
            ));
        }
        let zp_stride = blocks.div_ceil(2);
        let mut data = vec![0f32; n * k];
        for row in 0..n {
            for b in 0..blocks {
                let scale = scales[row * blocks + b];
                let zp = match zero_points {
                    Some(z) => {
                        let byte = z.get(row * zp_stride + b / 2).copied().unwrap_or(0x88);
                        f32::from(if b % 2 == 0 { byte & 0x0f } else { byte >> 4 })
                    }
                    None => 8.0,
                };
                let bytes = &packed[(row * blocks + b) * blob..][..blob];
                for j in 0..block {
                    let col = b * block + j;
                    if col >= k {
                        break;
                    }
                    let byte = bytes[j / 2];
                    let q = if j % 2 == 0 { byte & 0x0f } else { byte >> 4 };
                    data[row * k + col] = (f32::from(q) - zp) * scale;
                }
            }
        }
        Ok(Weight {
            data,
            shape: vec![n, k],
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn key(field: u32, wire: u8) -> u8 {
        u8::try_from(field << 3).unwrap() | wire
    }

    fn bytes_field(field: u32, b: &[u8]) -> Vec<u8> {
        let mut out = vec![key(field, 2), u8::try_from(b.len()).unwrap()];
        out.extend_from_slice(b);
        out
    }

    #[test]
    fn reads_a_4bit_block_matrix_as_a_linear_weight() {
        // K = 4 (one block of 4), N = 2 rows; row 0 = [0,1,2,3] - 8, row 1 = [15,14,8,8] - 8.
        let mut b_tensor = vec![key(1, 0), 2, key(1, 0), 1, key(1, 0), 2, key(2, 0), 2];
        b_tensor.extend(bytes_field(8, b"B"));
        b_tensor.extend(bytes_field(9, &[0x10, 0x32, 0xef, 0x88]));
        let mut s_tensor = vec![key(1, 0), 2, key(1, 0), 1, key(2, 0), 1];
        s_tensor.extend(bytes_field(8, b"S"));
        let scales: Vec<u8> = [0.5f32, 2.0].iter().flat_map(|f| f.to_le_bytes()).collect();
        s_tensor.extend(bytes_field(9, &scales));
        let attr = |name: &[u8], v: u8| {
            let mut a = bytes_field(1, name);
            a.extend([key(3, 0), v]);
            bytes_field(5, &a)
        };
        let mut node = bytes_field(1, b"x");
        node.extend(bytes_field(1, b"B"));
        node.extend(bytes_field(1, b"S"));
        node.extend(bytes_field(
            3,
            b"/bert/encoder/layer.0/output/dense/MatMul_Q4",
        ));
        node.extend(bytes_field(4, b"MatMulNBits"));
        for (n, v) in [(&b"K"[..], 4), (b"N", 2), (b"bits", 4), (b"block_size", 4)] {
            node.extend(attr(n, v));
        }
        let mut graph = bytes_field(1, &node);
        graph.extend(bytes_field(5, &b_tensor));
        graph.extend(bytes_field(5, &s_tensor));
        let mut model = vec![key(1, 0), 8];
        model.extend([key(7, 2)]);
        let len = u16::try_from(graph.len()).unwrap();
        model.extend([
            u8::try_from(len & 0x7f).unwrap() | 0x80,
            u8::try_from(len >> 7).unwrap(),
        ]);
        model.extend(graph);
        let g = parse(&model).unwrap();
        let w = g.weights::<()>(&HashMap::new()).unwrap();
        let w = &w["bert.encoder.layer.0.output.dense.weight"];
        assert_eq!(w.shape, vec![2, 4]);
        assert_eq!(w.data, vec![-4.0, -3.5, -3.0, -2.5, 14.0, 12.0, 0.0, 0.0]);
    }
}
