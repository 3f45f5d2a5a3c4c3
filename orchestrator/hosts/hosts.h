/* hosts.h -- the hosts wing's entry points (hosts.c), which the server (http/server.c) calls.
 * Internal to the orchestrator, like internal.h (which it includes). */
#ifndef ORCH_HOSTS_H
#define ORCH_HOSTS_H

#include "internal.h"

/* `server` execution mode.  start: listens on DATA/hosts/hosts.sock and spawns the
 * headless hosts (SBX_EPERM without bubblewrap unless CEREA_SERVER_TRUSTED=1, SBX_ENOENT when node
 * or the host script is missing, SBX_EINVAL for bad CEREA_HOSTS).  tick: assigns chats with live
 * runs to ready hosts (the cron calls it).  close: kills the hosts by handle; frees itself after
 * their exit callbacks. */
struct orch_hosts;
int orch__hosts_start(struct orch *o, struct sbx_error *err);
void orch__hosts_tick(struct orch_hosts *hs);
void orch__hosts_close(struct orch_hosts *hs);

#endif
