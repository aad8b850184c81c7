//! Host tests.
