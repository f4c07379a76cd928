/* Many unaligned writes in flight at once, disjoint in bytes but sharing
 * blocks, through io_uring on an O_DIRECT descriptor (FUSE direct_io with
 * async DIO, so the kernel sends them to the daemon concurrently).  The
 * final contents are therefore deterministic: every stripe carries its own
 * pattern.  Exits 1 and names the first wrong byte if any write was lost.
 *
 * usage: overlap FILE REGION_BYTES ROUNDS SEED */
#define _GNU_SOURCE
#include <fcntl.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define QD 128

static uint64_t rng(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static uint8_t pat(unsigned round, uint64_t stripe, uint64_t i)
{
	return (uint8_t)(round * 131 + stripe * 7 + i * 3 + 1);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: overlap FILE REGION ROUNDS SEED\n");
		return 2;
	}
	uint64_t region = strtoull(argv[2], NULL, 0);
	unsigned rounds = (unsigned)strtoul(argv[3], NULL, 0);
	uint64_t x = strtoull(argv[4], NULL, 0) | 1;
	int fd = open(argv[1], O_RDWR | O_DIRECT);
	int rfd = open(argv[1], O_RDONLY);
	struct io_uring ring;
	uint8_t *model = calloc(1, region), *got = malloc(region);

	if (fd < 0 || rfd < 0 || !model || !got) {
		perror("overlap: open");
		return 2;
	}
	if (io_uring_queue_init(QD, &ring, 0) < 0) {
		fprintf(stderr, "overlap: io_uring_queue_init failed\n");
		return 2;
	}
	/* the model starts from what is there */
	if (pread(rfd, model, region, 0) != (ssize_t)region) {
		perror("overlap: pread");
		return 2;
	}
	for (unsigned r = 0; r < rounds; r++) {
		/* an odd stripe width, so that stripes straddle block edges */
		uint64_t w = (rng(&x) % 3000) | 1;
		uint64_t n = region / w;
		uint64_t *order = malloc(n * sizeof(*order));
		uint8_t *bufs = malloc(n * w);
		uint64_t done = 0, sent = 0;
		unsigned inflight = 0;

		for (uint64_t s = 0; s < n; s++) {
			order[s] = s;
			for (uint64_t i = 0; i < w; i++)
				bufs[s * w + i] = model[s * w + i] = pat(r, s, i);
		}
		for (uint64_t s = n - 1; s > 0; s--) {
			uint64_t j = rng(&x) % (s + 1), t = order[s];
			order[s] = order[j];
			order[j] = t;
		}
		while (done < n) {
			while (sent < n && inflight < QD) {
				struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
				uint64_t s = order[sent++];
				io_uring_prep_write(sqe, fd, bufs + s * w, (unsigned)w, s * w);
				sqe->user_data = s;
				inflight++;
			}
			io_uring_submit(&ring);
			struct io_uring_cqe *cqe;
			if (io_uring_wait_cqe(&ring, &cqe) < 0) {
				fprintf(stderr, "overlap: wait failed\n");
				return 2;
			}
			if (cqe->res != (int)w) {
				fprintf(stderr, "overlap: round %u write of stripe %llu: %d (%s)\n", r,
					(unsigned long long)cqe->user_data, cqe->res,
					cqe->res < 0 ? strerror(-cqe->res) : "short");
				return 1;
			}
			io_uring_cqe_seen(&ring, cqe);
			inflight--;
			done++;
		}
		/* a fresh buffered open: the page cache is dropped at open */
		close(rfd);
		rfd = open(argv[1], O_RDONLY);
		if (rfd < 0 || pread(rfd, got, region, 0) != (ssize_t)region) {
			perror("overlap: pread");
			return 2;
		}
		for (uint64_t i = 0; i < region; i++)
			if (got[i] != model[i]) {
				fprintf(stderr,
					"overlap: round %u (stripe width %llu): byte %llu is %u, "
					"expected %u (stripe %llu)\n",
					r, (unsigned long long)w, (unsigned long long)i, got[i],
					model[i], (unsigned long long)(i / w));
				return 1;
			}
		printf("round %u: %llu writes of %llu bytes, region intact\n", r,
		       (unsigned long long)n, (unsigned long long)w);
		free(order);
		free(bufs);
	}
	return 0;
}
