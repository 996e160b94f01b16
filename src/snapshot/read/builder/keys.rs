//! The keys and values of the snapshot schema, interned first so their ids are constants.

use crate::snapshot::model::StrId;

/// Interned in this order by every builder.
pub const KNOWN: &[&str] = &[
    "",
    "action",
    "addr",
    "size",
    "stream",
    "time_us",
    "frames",
    "device_free",
    "compile_context",
    "user_metadata",
    "state",
    "requested_size",
    "address",
    "total_size",
    "blocks",
    "device",
    "segment_type",
    "is_expandable",
    "filename",
    "line",
    "name",
    "real_size",
    "history",
    "segments",
    "device_traces",
    "allocator_settings",
    "external_annotations",
    "large",
    "active_allocated",
    "active_pending_free",
    "active_awaiting_free",
    "inactive",
    "forward_frames",
    "pool_id",
];
pub const K_ACTION: StrId = 1;
pub const K_ADDR: StrId = 2;
pub const K_SIZE: StrId = 3;
pub const K_STREAM: StrId = 4;
pub const K_TIME_US: StrId = 5;
pub const K_FRAMES: StrId = 6;
pub const K_DEVICE_FREE: StrId = 7;
pub const K_COMPILE_CONTEXT: StrId = 8;
pub const K_USER_METADATA: StrId = 9;
pub const K_STATE: StrId = 10;
pub const K_REQUESTED_SIZE: StrId = 11;
pub const K_ADDRESS: StrId = 12;
pub const K_TOTAL_SIZE: StrId = 13;
pub const K_BLOCKS: StrId = 14;
pub const K_DEVICE: StrId = 15;
pub const K_SEGMENT_TYPE: StrId = 16;
pub const K_IS_EXPANDABLE: StrId = 17;
pub const K_FILENAME: StrId = 18;
pub const K_LINE: StrId = 19;
pub const K_NAME: StrId = 20;
pub const K_REAL_SIZE: StrId = 21;
pub const K_HISTORY: StrId = 22;
pub const K_SEGMENTS: StrId = 23;
pub const K_DEVICE_TRACES: StrId = 24;
pub const K_ALLOCATOR_SETTINGS: StrId = 25;
pub const K_EXTERNAL_ANNOTATIONS: StrId = 26;
pub const K_LARGE: StrId = 27;
pub const K_ACTIVE_ALLOCATED: StrId = 28;
pub const K_ACTIVE_PENDING_FREE: StrId = 29;
pub const K_ACTIVE_AWAITING_FREE: StrId = 30;
pub const K_INACTIVE: StrId = 31;
pub const K_FORWARD_FRAMES: StrId = 32;
pub const K_POOL_ID: StrId = 33;
