//! spindle-dispatch (placeholder, being written).
#![cfg_attr(not(test), no_std)]
