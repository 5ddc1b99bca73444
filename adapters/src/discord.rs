//! discord (being written).
