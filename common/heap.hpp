// How the process's heap gives memory back to the system.
#pragma once

namespace paradyse {

// Keeps what the heap frees for the next allocation (up to a GiB free at its top), instead of handing it
// back to the system as glibc's malloc does by default (the top of the heap past 128 KiB, and every
// block of a few MB that it served by its own mapping), and grows the heap 64 MiB at a time. Tracing and
// simulating a large step allocates and frees gigabytes in phases: faulted in again page by page, the same
// memory cost a step of 8,192 GPUs 12 s of system time out of 41 (6 s kept). A larger step (256 MiB) saved
// 4 s more but let an analytic compare of 10^7 lengths hold 38 MiB more than one of 10^6. The peak resident
// memory is unchanged: it is what the program holds at once. No effect where the C library is not glibc.
void keep_freed_heap();

}  // namespace paradyse
