/* See unit_netns.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit_netns.h"

static unsigned aliases;

bool unit_netns_enter(void)
{
	struct ifreq ifr = { 0 };
	int s, ret;

	/* A user namespace too where plain CLONE_NEWNET needs privileges we
	 * lack: it gives CAP_NET_ADMIN over the new network namespace. */
	if (unshare(CLONE_NEWNET) < 0 && unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
		return false;
	if ((s = socket(AF_INET, SOCK_DGRAM, 0)) < 0)
		return false;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	ret = ioctl(s, SIOCGIFFLAGS, &ifr);
	if (ret == 0) {
		ifr.ifr_flags |= IFF_UP;
		ret = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
	aliases = 0;
	return ret == 0;
}

bool unit_netns_add_v4(const char *addr)
{
	struct ifreq ifr = { 0 };
	struct sockaddr_in *a = (struct sockaddr_in *)&ifr.ifr_addr;
	int s, ret;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo:%u", ++aliases);
	a->sin_family = AF_INET;
	if (inet_pton(AF_INET, addr, &a->sin_addr) != 1) {
		errno = EINVAL;
		return false;
	}
	if ((s = socket(AF_INET, SOCK_DGRAM, 0)) < 0)
		return false;
	ret = ioctl(s, SIOCSIFADDR, &ifr);
	close(s);
	return ret == 0;
}

bool unit_netns_possible(void)
{
	int st;
	pid_t p = fork();

	if (p == 0)
		_exit(unit_netns_enter() ? 0 : 1);
	return p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}
