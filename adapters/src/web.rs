//! web (being written).
