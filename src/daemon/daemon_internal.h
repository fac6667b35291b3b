/*
 * The whole of the daemon module's internal headers, for code that wants
 * all of them (the unit tests, work written before the split); the
 * daemon's own files include the ones they need.
 */
#ifndef WR_DAEMON_INTERNAL_H
#define WR_DAEMON_INTERNAL_H

#include "daemon/daemon.h"
#include "daemon/files.h"
#include "daemon/initconn.h"
#include "daemon/jobs.h"
#include "daemon/kits.h"
#include "daemon/network.h"
#include "daemon/outlog.h"
#include "daemon/procs.h"
#include "daemon/request.h"
#include "daemon/roots.h"
#include "daemon/sandbox.h"
#include "daemon/snapshots.h"
#include "daemon/workspaces.h"

#endif
