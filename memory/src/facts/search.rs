//! Skeleton (filled in next).
