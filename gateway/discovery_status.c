/* The human `status`: the discovery controllers and what their logs list
 * (the daemon's "discovery" and "discovered" keys, daemon_discovery.c).
 * Nothing is printed when the daemon has no discovery configured. */
#include <stdio.h>

#include "gateway/base/json.h"
#include "gateway/discovery_status.h"

static const char *txt(const struct json_val *v, const char *key)
{
	return json_get_text(v, key, "-");
}

void discovery_print_status(const struct json_val *root)
{
	const struct json_val *dc = json_get(root, "discovery");
	const struct json_val *ds = json_get(root, "discovered");

	if (!dc || dc->type != JSON_ARR)
		return;
	printf("\n%-40s %-22s %5s %8s %6s %7s %7s  %s\n", "DISCOVERY", "STATE", "DEPTH",
	       "CONNECTS", "READS", "EVENTS", "RECORDS", "LAST-ERROR");
	for (size_t i = 0; i < dc->nr_kids; i++) {
		const struct json_val *d = &dc->kids[i];
		printf("%-40s %-22s %5s %8s %6s %7s %7s  %s\n", txt(d, "name"), txt(d, "state"),
		       txt(d, "depth"), txt(d, "connects"), txt(d, "log_reads"), txt(d, "events"),
		       txt(d, "records"), txt(d, "last_error"));
	}
	if (!ds || ds->type != JSON_ARR || !ds->nr_kids)
		return;
	printf("\n%-48s %-9s %-28s %-7s %s\n", "DISCOVERED SUBSYSTEM", "TRANSPORT", "ADDRESS",
	       "LISTED", "TARGET");
	for (size_t i = 0; i < ds->nr_kids; i++) {
		const struct json_val *p = &ds->kids[i];
		const struct json_val *l = json_get(p, "listed");
		char addr[96];
		snprintf(addr, sizeof(addr), "%s:%s", txt(p, "traddr"), txt(p, "trsvcid"));
		printf("%-48s %-9s %-28s %-7s %s\n", txt(p, "subnqn"), txt(p, "transport"), addr,
		       l && l->b ? "yes" : "no", txt(p, "target"));
	}
}
