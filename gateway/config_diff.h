/* What a reload changes: the running targets and exports against a newly
 * loaded configuration, matched by name.  An object is kept only when
 * everything it was built from is equal (every key, compared field by
 * field); otherwise it is changed, i.e. removed and added again.  An
 * export whose target changes changes with it (its volume belongs to the
 * target's controllers).  Gateway-wide keys apply at the next start only;
 * config_diff_restart_keys names those that differ. */
#ifndef GW_CONFIG_DIFF_H
#define GW_CONFIG_DIFF_H

#include <stdbool.h>
#include <stddef.h>

#include "gateway/config.h"

enum cd_action {
	CD_KEEP,
	CD_CHANGE,
	CD_ADD, /* new side only */
	CD_REMOVE, /* old side only */
};

struct cd_entry {
	enum cd_action action;
	size_t peer; /* KEEP / CHANGE: the index on the other side */
};

struct config_diff {
	struct cd_entry *old_t, *new_t, *old_e, *new_e;
	size_t nr_old_t, nr_new_t, nr_old_e, nr_new_e;
	unsigned added, removed, changed, kept; /* targets and exports together */
};

/* old_t/old_e: what runs now (they may come from different loads); n:
 * the new file.  0 or -ENOMEM. */
int config_diff(const struct gw_target *const *old_t, size_t nr_old_t,
		const struct gw_export *const *old_e, size_t nr_old_e, const struct gw_config *n,
		struct config_diff *d);
void config_diff_free(struct config_diff *d);

bool config_target_equal(const struct gw_target *a, const struct gw_target *b);
/* Compares the target by name only. */
bool config_export_equal(const struct gw_export *a, const struct gw_export *b);

/* "reactors, metrics" (the keys that differ and need a restart), "" when
 * none; buf is returned. */
const char *config_diff_restart_keys(const struct gw_config *a, const struct gw_config *b,
				     char *buf, size_t len);

#endif
