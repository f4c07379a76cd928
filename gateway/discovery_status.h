/* `nvmf-gateway status` (human form): discovery controllers and the
 * subsystems they found. */
#ifndef GW_DISCOVERY_STATUS_H
#define GW_DISCOVERY_STATUS_H

struct json_val;

void discovery_print_status(const struct json_val *root);

#endif
