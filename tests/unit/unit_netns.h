/* A network namespace of a test's own, for addresses that must not exist
 * on the host: the test's loopback device gets them, and nothing outside
 * the namespace can be reached from it.
 *
 * Root may always make one; others where user namespaces are allowed.  A
 * binary asks unit_netns_possible() in main(), before Check forks, and
 * leaves out (saying so) the cases that need one where it cannot. */
#ifndef NVMF_GATEWAY_UNIT_NETNS_H
#define NVMF_GATEWAY_UNIT_NETNS_H

#include <stdbool.h>

/* Whether this process could enter a namespace of its own (tried in a
 * child, which then exits: the caller stays where it is). */
bool unit_netns_possible(void);

/* In a test case (a forked child): moves the calling process into a new
 * network namespace with its loopback device up; false (errno set) if it
 * cannot. */
bool unit_netns_enter(void);

/* Adds the IPv4 address to the namespace's loopback device (as the alias
 * lo:N, N from 1); false (errno set) on failure. */
bool unit_netns_add_v4(const char *addr);

#endif
