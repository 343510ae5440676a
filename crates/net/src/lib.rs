//! Tokio runtime driving the AeroTP engine over UDP.
