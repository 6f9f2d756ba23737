//! Feed clients (placeholder replaced below).
