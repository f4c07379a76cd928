/* A pipe that carries a read's payload from the transport's socket to the
 * exporter's socket without copying it through user memory: the transport
 * splices the NVMe/TCP C2HData payload into it, the exporter splices its
 * reply header and that payload out to its client.  The kernel moves page
 * references, so the gateway never touches the bytes.
 *
 * The exporter owns the pipe and may put a prefix (its reply header) in
 * first.  The producer (the transport) appends payload and keeps `filled`;
 * whenever it cannot go on (pipe full, a digest to compute, a failed
 * command) it gives the bytes back with pipe_sink_unsplice, into the I/O's
 * own buffer, so that the data is always wholly in the pipe or wholly in the
 * buffer.  The pipe holds exactly prefix_len + filled bytes at all times,
 * unless `broken`.
 *
 * A WRITE runs the other way round (pipe_sink_tee): the exporter splices
 * the client's payload into a pipe, and the transport duplicates it into
 * its own pipe behind the H2CData header and splices that to its socket.
 * The exporter's pipe keeps the payload until the command completes, so a
 * retry on another path still has it.  A layer that cannot send from a
 * pipe takes the payload out into the buffer first (pipe_sink_unsplice);
 * here too it is wholly in one place: the pipe when filled == length. */
#ifndef GW_PIPE_SINK_H
#define GW_PIPE_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define PIPE_SINK_PREFIX_MAX 48u

struct pipe_sink {
	int rfd, wfd;
	uint32_t cap; /* the pipe's size in bytes (F_GETPIPE_SZ) */
	uint32_t filled; /* payload bytes after the prefix */
	uint8_t prefix_len;
	bool broken; /* a pipe operation failed: its content is unknown */
	uint8_t prefix[PIPE_SINK_PREFIX_MAX];
	uint64_t nr_spliced; /* payload bytes that went through, for the log */
};

/* NVMF_GATEWAY_NO_SPLICE is set (to anything but 0): no pipes at all. */
bool pipe_sink_disabled(void);

/* Opens a non-blocking pipe of at least `cap` bytes if the kernel allows
 * (it keeps the default size otherwise: s->cap says what it got). */
int pipe_sink_open(struct pipe_sink *s, uint32_t cap);
void pipe_sink_close(struct pipe_sink *s);
bool pipe_sink_is_open(const struct pipe_sink *s);
/* The same within the process's budget of pipes, shared by every layer
 * that opens them for I/O (NBD connections, NVMe/TCP queues): all of them
 * together hold at most a quarter of the descriptor limit, so that
 * accepts, reconnects and the control socket never run out for them.
 * -EMFILE when the budget is spent.  A sink opened so is closed so. */
int pipe_sink_open_counted(struct pipe_sink *s, uint32_t cap);
void pipe_sink_close_counted(struct pipe_sink *s);
/* Pipes open through the budget right now, over all layers (for tests:
 * back to what it was once everything that opened them is gone). */
unsigned long pipe_sink_counted_open(void);

/* The pipe must be empty: writes len bytes (at most PIPE_SINK_PREFIX_MAX)
 * that go out before the payload. */
int pipe_sink_set_prefix(struct pipe_sink *s, const void *p, size_t len);

/* Moves at most len bytes of payload from the socket fd (blocking or not:
 * it takes only what the socket holds) into the pipe.  Returns the count,
 * -EAGAIN when the socket holds nothing, -ENOSPC when the pipe is full, or
 * another -errno. */
ssize_t pipe_sink_from_socket(struct pipe_sink *s, int fd, size_t len);
/* The same for an O_NONBLOCK socket, one system call fewer: it splices
 * first and asks FIONREAD only when that would block. */
ssize_t pipe_sink_from_nb_socket(struct pipe_sink *s, int fd, size_t len);
/* Appends len bytes from memory (payload the transport already read);
 * -ENOSPC when the pipe has no room for all of them (some may have gone
 * in: filled says how many). */
int pipe_sink_put(struct pipe_sink *s, const void *buf, size_t len);
/* The producer gives up: the payload goes back into iov at offset 0 and the
 * pipe keeps only the prefix.  -errno (the sink is then broken) if the pipe
 * fails. */
int pipe_sink_unsplice(struct pipe_sink *s, const struct iovec *iov, unsigned cnt);
/* Drops the payload, keeping the prefix (a command to be sent again). */
int pipe_sink_reset(struct pipe_sink *s);
/* Empties the pipe, prefix and all. */
int pipe_sink_empty(struct pipe_sink *s);

/* Duplicates src's payload (src has no prefix) behind what dst holds,
 * leaving src as it was: the page references are shared, no byte is
 * copied.  -ENOSPC when dst lacks room for all of it; some may have gone
 * in (dst->filled says), and only emptying dst makes sense then. */
int pipe_sink_tee(struct pipe_sink *dst, const struct pipe_sink *src);

/* Moves at most len bytes (prefix first, then payload) out to the socket
 * fd, which must be O_NONBLOCK.  Returns the count or -errno (-EAGAIN when
 * the socket is full).  `more`: further replies follow (MSG_MORE). */
ssize_t pipe_sink_to_socket(struct pipe_sink *s, int fd, size_t len, bool more);

#endif
