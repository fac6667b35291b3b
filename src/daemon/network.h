/*
 * Internal to the daemon module: what the rest of the daemon asks of the
 * network glue (network.c, policy_api.c, secret_api.c): a sandbox's
 * egress, its environment for the proxy, published ports, and their API
 * handlers. Loop thread.
 */
#ifndef WR_DAEMON_NETWORK_H
#define WR_DAEMON_NETWORK_H

#include <jansson.h>

#include "daemon/daemon.h"
#include "net/net.h"

struct wr_sandbox;
struct wr_trust;

/* Make the egress engine (warren's CA on first start), load the policy,
 * secrets and port publications from the store. From wr_daemon_init. */
int wr_network_init(struct wr_daemon *d, wr_error_t *err);
/* Close every listener (daemon shutdown); wr_network_free after the loop
 * has let the handles close. */
void wr_network_shutdown(struct wr_daemon *d);
void wr_network_free(struct wr_daemon *d);
/* A sandbox's init is running: start its proxy and DNS server on the
 * listeners init holds (listen_fds: taken over, see wr_net_attach) and
 * with its network namespace (netns_fd borrowed). Before its first
 * process. */
int wr_network_sandbox_up(struct wr_sandbox *sb, int netns_fd,
                          const int listen_fds[WR_NET_NFDS], wr_error_t *err);
/* The sandbox stopped: close its listeners and connections. */
void wr_network_sandbox_down(struct wr_sandbox *sb);
/* The sandbox is being removed: drop its rules and publications. */
void wr_network_sandbox_removed(struct wr_sandbox *sb);
/* Variables every process in sb gets: the proxy (HTTP_PROXY, HTTPS_PROXY,
 * NO_PROXY in both cases), the CA bundle paths, and a placeholder for
 * each secret's variables. NULL-ended "K=V" list (caller frees). */
char **wr_network_env(struct wr_sandbox *sb);
/* Whether NAME is one of the variables wr_network_env always sets (the
 * proxy's and the CA's), which nothing else may set. */
bool wr_network_sets_env(const char *name);
/* Add "ports" (the sandbox's publications) to a sandbox object. */
void wr_network_sandbox_json_extras(const struct wr_sandbox *sb, json_t *json);
/* warren's CA certificate (PEM), for the sandbox's trust store. */
const char *wr_network_ca_pem(struct wr_daemon *d);
/* The scanner of the extra CAs sandboxes trust: thread-safe, so a start
 * job scans with it on its worker thread (wr_trust_scan). */
struct wr_trust *wr_network_trust(struct wr_daemon *d);
/* {"count","cas":[{subject,file,not_after,source}],"skipped":[...]}: the
 * extra CAs as the last scan found them (no I/O). */
json_t *wr_network_trust_json(struct wr_daemon *d);
/* The resolver's counters, for GET /v1/info: {"queries":{"A","AAAA"},
 * "hits", "coalesced", "failures" (the same), "hosts", "limited",
 * "entries", "inflight"}. */
json_t *wr_network_resolver_json(struct wr_daemon *d);
/* What the resolver's cache holds for a normalised name: {"queries": N
 * (upstream lookups for it, both families), "A": ENTRY|null, "AAAA":
 * ENTRY|null}, ENTRY being {"addresses", "age_s", "ttl_s", "ttl_left_s",
 * "fresh", "inflight", "queries", "error"}. */
json_t *wr_network_cached_json(struct wr_daemon *d, const char *host);
/* The registry URL the host's npm is configured with, or NULL when it is
 * unknown; *pending while npm is still being asked (at daemon start). */
const char *wr_network_npm_registry_url(struct wr_daemon *d, bool *pending);

void wr_api_policy_get(wr_http_req_t *req, void *ctx);
void wr_api_policy_init(wr_http_req_t *req, void *ctx);
void wr_api_policy_rule_add(wr_http_req_t *req, void *ctx);
void wr_api_policy_rule_delete(wr_http_req_t *req, void *ctx);
void wr_api_policy_check(wr_http_req_t *req, void *ctx);
void wr_api_policy_log(wr_http_req_t *req, void *ctx);
void wr_api_secret_list(wr_http_req_t *req, void *ctx);
void wr_api_secret_put(wr_http_req_t *req, void *ctx);
void wr_api_secret_delete(wr_http_req_t *req, void *ctx);
void wr_api_ports_list(wr_http_req_t *req, void *ctx);
void wr_api_ports_publish(wr_http_req_t *req, void *ctx);
void wr_api_ports_unpublish(wr_http_req_t *req, void *ctx);

#endif
