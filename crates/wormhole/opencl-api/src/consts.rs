//! The OpenCL constants the client and server both use, defined once here
//! rather than in each file that needs one.

pub const CL_SUCCESS: i32 = 0;
pub const CL_DEVICE_NOT_FOUND: i32 = -1;
pub const CL_MEM_OBJECT_ALLOCATION_FAILURE: i32 = -4;
pub const CL_OUT_OF_RESOURCES: i32 = -5;
pub const CL_OUT_OF_HOST_MEMORY: i32 = -6;
pub const CL_INVALID_VALUE: i32 = -30;
pub const CL_INVALID_PLATFORM: i32 = -32;
pub const CL_INVALID_DEVICE: i32 = -33;
pub const CL_INVALID_CONTEXT: i32 = -34;
pub const CL_INVALID_COMMAND_QUEUE: i32 = -36;
pub const CL_INVALID_QUEUE_PROPERTIES: i32 = -35;
pub const CL_INVALID_HOST_PTR: i32 = -37;
pub const CL_INVALID_BUFFER_SIZE: i32 = -61;
pub const CL_INVALID_MEM_OBJECT: i32 = -38;
pub const CL_INVALID_IMAGE_FORMAT_DESCRIPTOR: i32 = -39;
pub const CL_INVALID_SAMPLER: i32 = -41;
pub const CL_INVALID_PROGRAM: i32 = -44;
pub const CL_INVALID_KERNEL: i32 = -48;
pub const CL_INVALID_ARG_VALUE: i32 = -50;
pub const CL_INVALID_ARG_SIZE: i32 = -51;
pub const CL_INVALID_EVENT: i32 = -58;
pub const CL_INVALID_OPERATION: i32 = -59;
pub const CL_PLATFORM_NOT_FOUND_KHR: i32 = -1001;

pub const CL_MEM_USE_HOST_PTR: u64 = 1 << 3;
pub const CL_MEM_ALLOC_HOST_PTR: u64 = 1 << 4;
pub const CL_MEM_COPY_HOST_PTR: u64 = 1 << 5;
pub const CL_MAP_READ: u64 = 1;
pub const CL_MAP_WRITE: u64 = 2;
pub const CL_MAP_WRITE_INVALIDATE_REGION: u64 = 4;
pub const CL_CONTEXT_PLATFORM: isize = 0x1084;
pub const CL_IMAGE_ELEMENT_SIZE: u32 = 0x1111;
pub const CL_MEM_HOST_PTR: u32 = 0x1103;
pub const CL_MEM_FLAGS: u32 = 0x1101;
pub const CL_MEM_SIZE: u32 = 0x1102;
pub const CL_MEM_TYPE: u32 = 0x1100;
pub const CL_MEM_OBJECT_IMAGE2D: u32 = 0x10F1;

pub const CL_TRUE: u32 = 1;
pub const CL_COMPLETE: i32 = 0;
pub const CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST: i32 = -14;
pub const CL_KERNEL_ARG_INFO_NOT_AVAILABLE: i32 = -19;
pub const CL_INVALID_LINKER_OPTIONS: i32 = -67;

pub const CL_MEM_HOST_WRITE_ONLY: u64 = 1 << 7;
pub const CL_MEM_HOST_READ_ONLY: u64 = 1 << 8;
pub const CL_MEM_HOST_NO_ACCESS: u64 = 1 << 9;
pub const CL_MEM_ASSOCIATED_MEMOBJECT: u32 = 0x1107;

pub const CL_MEM_OBJECT_BUFFER: u32 = 0x10F0;
pub const CL_MEM_OBJECT_IMAGE3D: u32 = 0x10F2;
pub const CL_MEM_OBJECT_IMAGE2D_ARRAY: u32 = 0x10F3;
pub const CL_MEM_OBJECT_IMAGE1D: u32 = 0x10F4;
pub const CL_MEM_OBJECT_IMAGE1D_ARRAY: u32 = 0x10F5;
pub const CL_MEM_OBJECT_IMAGE1D_BUFFER: u32 = 0x10F6;

pub const CL_IMAGE_ROW_PITCH: u32 = 0x1112;
pub const CL_IMAGE_SLICE_PITCH: u32 = 0x1113;
pub const CL_IMAGE_WIDTH: u32 = 0x1114;
pub const CL_IMAGE_HEIGHT: u32 = 0x1115;
pub const CL_IMAGE_DEPTH: u32 = 0x1116;
pub const CL_IMAGE_ARRAY_SIZE: u32 = 0x1117;

pub const CL_PLATFORM_NAME: u32 = 0x0902;
pub const CL_DEVICE_GLOBAL_MEM_SIZE: u32 = 0x101F;
pub const CL_CONTEXT_DEVICES: u32 = 0x1081;
pub const CL_CONTEXT_PROPERTIES: u32 = 0x1082;
pub const CL_QUEUE_DEVICE: u32 = 0x1091;
pub const CL_PROGRAM_NUM_DEVICES: u32 = 0x1162;
pub const CL_PROGRAM_BINARY_SIZES: u32 = 0x1165;
pub const CL_PROGRAM_BINARIES: u32 = 0x1166;
pub const CL_EVENT_COMMAND_QUEUE: u32 = 0x11D0;
pub const CL_EVENT_COMMAND_TYPE: u32 = 0x11D1;
pub const CL_EVENT_COMMAND_EXECUTION_STATUS: u32 = 0x11D3;
pub const CL_EVENT_CONTEXT: u32 = 0x11D4;
