//! markdown (being written).
