//! slack (being written).
