/*
 * The io_uring backend's settings that tests change (io_uring.c). The backend itself is
 * sxe__io_uring, declared in io.h.
 */
#ifndef SXE_IO_URING_H
#define SXE_IO_URING_H

/*
 * Sets the provided receive buffers that the next open makes: count buffers (a power of 2, at
 * most 32768) of size bytes each. Loops already open keep theirs. 0, 0 restores the defaults,
 * 512 buffers of 2048 bytes.
 */
void sxe__io_uring_set_buffers(unsigned count, unsigned size);

#endif
