/* The discovery log page walk, apart from the admin queue so that a
 * fuzzer can play the target (tests/fuzz/fuzz_discovery.c): the header,
 * then the records it announces in chunks, then the header again; a
 * generation counter that moved in between means the records may be a mix
 * of two versions, and the walk starts over (up to DISC_TRIES times). */
#ifndef GW_DISCOVER_H
#define GW_DISCOVER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define DISC_MAX_RECORDS 4096
#define DISC_CHUNK 4096
#define DISC_TRIES 10

struct disc_walk {
	uint8_t *buf; /* the header and records, then the header read again */
	uint32_t len, off; /* bytes wanted before the second header, bytes read */
	uint32_t asked; /* the length of the read in flight */
	bool have_hdr; /* the first header is in: len counts the records */
	uint64_t genctr;
	unsigned tries;
	const char *why; /* DISC_ERR */
};

enum disc_step { DISC_READ, DISC_DONE, DISC_ERR };

/* 0 or -ENOMEM; free with disc_walk_free. */
int disc_walk_init(struct disc_walk *d);
void disc_walk_free(struct disc_walk *d);
/* The next Get Log Page: log offset, length, where the bytes go. */
void disc_walk_next(struct disc_walk *d, uint32_t *log_off, uint32_t *n, uint8_t **dst);
/* n bytes of the last read arrived (a target may return fewer than
 * asked, in whole dwords): DISC_READ (read the next), DISC_DONE (buf holds
 * one version of the log, the second header after the records has the
 * same counter) or DISC_ERR (why says it; a log that kept changing for
 * DISC_TRIES walks is one). */
enum disc_step disc_walk_got(struct disc_walk *d, uint32_t n);
/* Back to the first header (a new connection's walk starts there). */
void disc_walk_restart(struct disc_walk *d);

/* The log at buf (as DISC_DONE leaves it), as nvme-cli prints it, or JSON. */
void disc_print(FILE *f, const uint8_t *buf, bool json);

#endif
