/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ports out of the sandbox; see ports.h. A connection goes through three
 * states: waiting for init's socket (CONNECT sent), waiting for that
 * socket's connection to complete (EPOLLOUT), relaying. init's answer is
 * hostile input: the fd must be an unconnected-or-connecting TCP socket,
 * the id one we are waiting for; anything else is closed and the client
 * reset.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "events.h"
#include "fdutil.h"
#include "ports.h"
#include "proto.h"
#include "relay.h"
#include "supervisor.h"

struct hutch_ports {
	struct sup *s;
	struct fwd *fwds;
	struct pconn *conns;
	unsigned nconns;
	int64_t last_close_ms; /* monotonic: a connection's end is activity */
	uint64_t next_id;
	int spare_fd; /* given up to accept (and reset) a connection when out of fds */
	void (*wake)(struct sup *s, double arrival_sec); /* idle.h, from run.c */
};

struct fwd {
	struct hutch_ports *ps;
	struct hutch_port_spec spec; /* host_port: the one bound */
	bool executor;               /* made by POST /bind_port */
	int lfd;
	struct hutch_watch w;
	unsigned open;
	uint64_t total;
	struct hutch_deferred d;
	struct fwd *next;
};

enum pconn_state {
	PC_INIT,       /* CONNECT sent, waiting for init's socket */
	PC_CONNECTING, /* the socket's connection is in progress */
	PC_RELAY,
};

struct pconn {
	struct hutch_ports *ps;
	struct fwd *fwd;
	uint64_t id;
	enum pconn_state state;
	bool ipv6; /* asked for ::1 (127.0.0.1 refused) */
	int cfd, sfd;
	struct hutch_watch wc, wsb;
	struct hutch_relay_dir up, down; /* client -> sandbox, sandbox -> client */
	struct hutch_deferred d;
	struct pconn *next;
};

static void free_deferred_fwd(struct hutch_deferred *d)
{
	free((struct fwd *)((char *)d - offsetof(struct fwd, d)));
}

static void free_deferred_conn(struct hutch_deferred *d)
{
	struct pconn *c = (struct pconn *)((char *)d - offsetof(struct pconn, d));

	hutch_relay_dir_done(&c->up);
	hutch_relay_dir_done(&c->down);
	free(c);
}

static struct hutch_ports *ports_new(struct sup *s)
{
	struct hutch_ports *ps = calloc(1, sizeof(*ps));

	if (ps) {
		ps->s = s;
		ps->spare_fd = -EBADF;
	}
	return ps;
}

static struct hutch_ports *ports_get(struct sup *s)
{
	if (!s->ports)
		s->ports = ports_new(s);
	return s->ports;
}

/* End a connection; reset: the client sees it fail at once (RST). */
static void conn_close(struct pconn *c, bool reset)
{
	struct hutch_ports *ps = c->ps;
	struct sup *s = ps->s;
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (reset && c->cfd >= 0)
		(void)setsockopt(c->cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	hutch_loop_close(&s->loop, &c->wc, &c->cfd);
	hutch_loop_close(&s->loop, &c->wsb, &c->sfd);
	for (struct pconn **pp = &ps->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	if (c->fwd)
		c->fwd->open--;
	ps->nconns--;
	ps->last_close_ms = hutch_now_mono_ms();
	hutch_loop_defer(&s->loop, &c->d, free_deferred_conn);
}

static int ask_init(struct pconn *c)
{
	struct hutch_msg_connect m = { .port = c->fwd->spec.sandbox_port, .ipv6 = c->ipv6 };

	c->state = PC_INIT;
	return hutch_proto_send(c->ps->s->init_sock, HUTCH_MSG_CONNECT, c->id, &m, sizeof(m), NULL,
	                        0);
}

/* What each socket waits for now. */
static void conn_update(struct pconn *c)
{
	struct hutch_loop *l = &c->ps->s->loop;
	uint32_t cw = 0, sw = 0;

	if (c->state == PC_CONNECTING) {
		sw = EPOLLOUT;
	} else if (c->state == PC_RELAY) {
		hutch_relay_events(&c->up, &c->down, &cw, &sw);
	}
	if (hutch_loop_mod(l, &c->wc, cw) < 0 ||
	    (c->sfd >= 0 && hutch_watch_active(&c->wsb) && hutch_loop_mod(l, &c->wsb, sw) < 0))
		conn_close(c, true);
}

static void conn_pump(struct pconn *c, uint32_t events)
{
	int r = (events & EPOLLERR) ? -EIO : hutch_relay_pump2(&c->up, &c->down, c->cfd, c->sfd);

	if (r != 0)
		conn_close(c, r < 0); /* a reset, or both ends done */
	else
		conn_update(c);
}

/* The sandbox side's connection completed, or failed. */
static void conn_connected(struct pconn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(c->sfd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err == ECONNREFUSED && !c->ipv6) {
		/* Nothing on 127.0.0.1: a server may listen on ::1 only. */
		hutch_loop_close(&c->ps->s->loop, &c->wsb, &c->sfd);
		c->ipv6 = true;
		if (ask_init(c) < 0)
			conn_close(c, true);
		return;
	}
	if (err || hutch_relay_dir_init(&c->up) < 0 || hutch_relay_dir_init(&c->down) < 0) {
		conn_close(c, true);
		return;
	}
	c->state = PC_RELAY;
	conn_pump(c, 0);
}

static void on_client(struct hutch_watch *w, uint32_t events)
{
	struct pconn *c = w->ptr;

	if (c->state == PC_RELAY)
		conn_pump(c, events);
	else if (events & (EPOLLERR | EPOLLHUP))
		conn_close(c, true); /* gave up before the sandbox answered */
}

static void on_sandbox(struct hutch_watch *w, uint32_t events)
{
	struct pconn *c = w->ptr;

	if (c->state == PC_CONNECTING)
		conn_connected(c);
	else if (c->state == PC_RELAY)
		conn_pump(c, events);
}

/* init's socket must be what we asked for: a TCP socket, not listening. */
static bool socket_is_tcp(int fd)
{
	int v[3] = { 0 }, opts[3] = { SO_DOMAIN, SO_TYPE, SO_PROTOCOL }, acc = 1;
	socklen_t len = sizeof(int);

	for (int i = 0; i < 3; i++)
		if (getsockopt(fd, SOL_SOCKET, opts[i], &v[i], &len) < 0)
			return false;
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) < 0 || acc)
		return false;
	return (v[0] == AF_INET || v[0] == AF_INET6) && v[1] == SOCK_STREAM && v[2] == IPPROTO_TCP;
}

static void on_connected(void *ud, uint32_t type, uint64_t id, const void *body, size_t len, int fd)
{
	struct hutch_ports *ps = ud;
	struct hutch_msg_connected m;
	struct pconn *c = NULL;

	for (struct pconn *it = ps->conns; it; it = it->next)
		if (it->id == id && it->state == PC_INIT)
			c = it;
	if (!c || len != sizeof(m)) {
		if (fd >= 0)
			close(fd);
		if (c) /* broken, or its socket lost on the way (out of fds) */
			conn_close(c, true);
		return;
	}
	memcpy(&m, body, sizeof(m));
	if (m.error == -ECONNREFUSED && !c->ipv6 && fd < 0) {
		c->ipv6 = true;
		if (ask_init(c) < 0)
			conn_close(c, true);
		return;
	}
	if (fd < 0 || m.error != 0 || !socket_is_tcp(fd) || hutch_fd_nonblock(fd, true) < 0) {
		if (fd >= 0)
			close(fd);
		conn_close(c, true);
		return;
	}
	c->sfd = fd;
	c->state = PC_CONNECTING;
	if (hutch_loop_add(&ps->s->loop, &c->wsb, fd, EPOLLOUT) < 0)
		conn_close(c, true);
}

static void on_accept(struct hutch_watch *w, uint32_t events)
{
	struct fwd *f = w->ptr;
	struct hutch_ports *ps = f->ps;
	struct sup *s = ps->s;

	for (int i = 0; i < 64; i++) {
		int fd = accept4(f->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct pconn *c;

		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			hutch_accept_shed(f->lfd, &ps->spare_fd);
			continue;
		}
		if (fd < 0)
			return;
		c = ps->nconns < HUTCH_PORT_CONNS_MAX && s->state == SUP_RUNNING
		            ? calloc(1, sizeof(*c))
		            : NULL;
		if (!c) {
			hutch_close_reset(fd);
			continue;
		}
		*c = (struct pconn){
			.ps = ps, .fwd = f, .id = ++ps->next_id, .cfd = fd, .sfd = -EBADF
		};
		c->up = c->down = (struct hutch_relay_dir)HUTCH_RELAY_DIR_INIT;
		hutch_watch_init(&c->wc, on_client, c);
		hutch_watch_init(&c->wsb, on_sandbox, c);
		c->next = ps->conns;
		ps->conns = c;
		ps->nconns++;
		f->open++;
		f->total++;
		/* A connection is activity: it wakes a sleeping sandbox and
		 * keeps it awake while open (hutch_ports_activity()). */
		if (ps->wake)
			ps->wake(s, hutch_now_mono_sec());
		if (hutch_loop_add(&s->loop, &c->wc, fd, 0) < 0 || ask_init(c) < 0)
			conn_close(c, true);
	}
}

/* Bind and listen; err says which port and what to do. */
static int listen_on(struct hutch_port_spec *spec, struct hutch_err *err)
{
	union {
		struct sockaddr sa;
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} a = { 0 };
	socklen_t alen;
	int one = 1, r;
	_cleanup_close_ int fd = -EBADF;
	char host[HUTCH_PORT_ADDR_MAX + 10];

	hutch_port_spec_host(spec, 0, host, sizeof(host));
	if (spec->ipv6) {
		a.in6.sin6_family = AF_INET6;
		a.in6.sin6_port = htons(spec->host_port);
		r = inet_pton(AF_INET6, spec->host_addr, &a.in6.sin6_addr);
		alen = sizeof(a.in6);
	} else {
		a.in.sin_family = AF_INET;
		a.in.sin_port = htons(spec->host_port);
		r = inet_pton(AF_INET, spec->host_addr, &a.in.sin_addr);
		alen = sizeof(a.in);
	}
	if (r != 1)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "invalid host address '%s': give an IPv4 address or "
		                           "[IPv6]",
		                           spec->host_addr);
	fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "socket for host port %s", host);
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (spec->ipv6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, &a.sa, alen) < 0) {
		r = -errno;
		if (r == -EADDRINUSE)
			return hutch_err_set(err, r,
			                     "host port %s is already in use: stop what listens "
			                     "there, or publish on another host port (-p "
			                     "OTHER:%u, or -p 0:%u for any free one)",
			                     host, spec->sandbox_port, spec->sandbox_port);
		/* The caller named an address this machine does not have: its
		 * mistake (usage), not a conflict of state as the errno says. */
		if (r == -EADDRNOTAVAIL)
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, r,
			                           "host address %s is not an address of this "
			                           "machine: name one it has (ip -br addr), or "
			                           "leave it out for 127.0.0.1",
			                           spec->host_addr);
		if (r == -EACCES)
			return hutch_err_set_class(err, HUTCH_ERRC_NOT_CAPABLE, r,
			                           "host port %s: ports below 1024 need root (or "
			                           "net.ipv4.ip_unprivileged_port_start): publish "
			                           "on a port from 1024, or 0 for any free one",
			                           host);
		return hutch_err_set_errno(err, r, "bind host port %s", host);
	}
	if (listen(fd, 4096) < 0 || getsockname(fd, &a.sa, &alen) < 0)
		return hutch_err_set_errno(err, -errno, "listen on host port %s", host);
	spec->host_port = ntohs(spec->ipv6 ? a.in6.sin6_port : a.in.sin_port);
	return TAKE_FD(fd);
}

/* A forward as an object in an array (state.json's, without libcjson). */
static void fwd_write(const struct fwd *f, bool live, struct hutch_jw *w)
{
	char host[HUTCH_PORT_ADDR_MAX + 10];

	hutch_port_spec_host(&f->spec, 0, host, sizeof(host));
	hutch_jw_open(w, NULL, '{');
	hutch_jw_num(w, "sandbox_port", f->spec.sandbox_port);
	hutch_jw_str(w, "host_address", f->spec.host_addr);
	hutch_jw_num(w, "host_port", f->spec.host_port);
	hutch_jw_str(w, "host", host);
	hutch_jw_str(w, "source", f->executor ? "bind_port" : "publish");
	if (live) {
		hutch_jw_open(w, "connections", '{');
		hutch_jw_num(w, "open", f->open);
		hutch_jw_num(w, "total", (double)f->total);
		hutch_jw_close(w, '{');
	}
	hutch_jw_close(w, '{');
}

static cJSON *fwd_json(const struct fwd *f, bool live)
{
	struct hutch_jw w;

	hutch_jw_init(&w, HUTCH_JW_CJSON_MAX);
	fwd_write(f, live, &w);
	return hutch_jw_to_cjson(&w);
}

static int fwd_add(struct hutch_ports *ps, const struct hutch_port_spec *spec, bool executor,
                   struct fwd **ret, struct hutch_err *err)
{
	struct fwd *f = ps ? calloc(1, sizeof(*f)) : NULL;
	int fd;

	if (!f)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	f->spec = *spec;
	fd = listen_on(&f->spec, err);
	if (fd < 0) {
		free(f);
		return fd;
	}
	f->ps = ps;
	f->lfd = fd;
	f->executor = executor;
	hutch_watch_init(&f->w, on_accept, f);
	{ /* in the order made: -p as given, bind_port last */
		struct fwd **pp = &ps->fwds;
		while (*pp)
			pp = &(*pp)->next;
		*pp = f;
	}
	*ret = f;
	return 0;
}

static void fwd_close(struct sup *s, struct fwd *f)
{
	struct hutch_ports *ps = f->ps;

	for (struct pconn *c = ps->conns, *next; c; c = next) {
		next = c->next;
		if (c->fwd == f)
			conn_close(c, true);
	}
	hutch_loop_close(&s->loop, &f->w, &f->lfd); /* closes it, watched or not */
	for (struct fwd **pp = &ps->fwds; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	if (s->loop.epfd >= 0)
		hutch_loop_defer(&s->loop, &f->d, free_deferred_fwd);
	else
		free(f);
}

int hutch_ports_open(const struct hutch_port_spec *publish, size_t n, struct hutch_ports **ret,
                     struct hutch_err *err)
{
	struct fwd *f;
	int r;

	if (n == 0) /* none: no object, as with no -p before */
		return 0;
	if (!*ret && !(*ret = ports_new(NULL)))
		return hutch_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		r = fwd_add(*ret, &publish[i], false, &f, err);
		if (r < 0)
			return hutch_err_prefix(err, "publish");
	}
	return 0;
}

void hutch_ports_adopt(struct sup *s, struct hutch_ports *ps)
{
	if (!ps)
		return;
	ps->s = s;
	s->ports = ps;
}

int hutch_ports_watch(struct sup *s, void (*wake)(struct sup *s, double arrival_sec))
{
	struct hutch_ports *ps = ports_get(s);
	struct rlimit rl;
	int r;

	if (!ps)
		return -ENOMEM;
	ps->wake = wake;
	hutch_cmds_on_message(&s->cmds, on_connected, ps);
	/* A relayed connection holds six fds (two sockets, two pipes): the
	 * soft limit goes up to the hard one, now that init is cloned (the
	 * sandbox keeps the limits it was given). */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (ps->spare_fd < 0)
		ps->spare_fd = hutch_spare_fd();
	for (struct fwd *f = ps->fwds; f; f = f->next) {
		r = hutch_loop_add(&s->loop, &f->w, f->lfd, EPOLLIN);
		if (r < 0)
			return r;
	}
	return 0;
}

static struct fwd *executor_fwd(struct hutch_ports *ps)
{
	for (struct fwd *f = ps ? ps->fwds : NULL; f; f = f->next)
		if (f->executor)
			return f;
	return NULL;
}

int64_t hutch_ports_activity(const struct sup *s, unsigned *ret_open)
{
	*ret_open = s->ports ? s->ports->nconns : 0;
	return s->ports ? s->ports->last_close_ms : 0;
}

int hutch_ports_bind(struct sup *s, const struct hutch_port_spec *spec, bool executor,
                     cJSON **ret_json, uint16_t *ret_current, struct hutch_err *err)
{
	struct fwd *f = executor ? executor_fwd(s->ports) : NULL;
	size_t n = 0;
	int r;

	if (f) {
		*ret_current = f->spec.sandbox_port;
		return hutch_err_set(err, -EEXIST, "Port already bound");
	}
	for (f = s->ports ? s->ports->fwds : NULL; f; f = f->next)
		n++;
	if (n >= HUTCH_PUBLISH_MAX + 1)
		return hutch_err_set_class(err, HUTCH_ERRC_LIMIT, -E2BIG,
		                           "too many forwards: at most %d (%d of -p, one of "
		                           "POST /bind_port): unbind one first, or create the "
		                           "sandbox with fewer -p",
		                           HUTCH_PUBLISH_MAX + 1, HUTCH_PUBLISH_MAX);
	r = fwd_add(ports_get(s), spec, executor, &f, err);
	if (r < 0)
		return r;
	r = hutch_loop_add(&s->loop, &f->w, f->lfd, EPOLLIN);
	if (r < 0) {
		fwd_close(s, f);
		return hutch_err_set_errno(err, r, "watch the host port");
	}
	hutch_event(s, "port %u published on %s:%u", f->spec.sandbox_port, f->spec.host_addr,
	            f->spec.host_port);
	*ret_json = fwd_json(f, true);
	return 0;
}

int hutch_ports_unbind(struct sup *s, uint16_t sandbox_port, uint16_t *ret_current)
{
	struct fwd *f = executor_fwd(s->ports);

	if (!f)
		return 0;
	if (sandbox_port && f->spec.sandbox_port != sandbox_port) {
		*ret_current = f->spec.sandbox_port;
		return -ENOENT;
	}
	hutch_event(s, "port %u unpublished from %s:%u", f->spec.sandbox_port, f->spec.host_addr,
	            f->spec.host_port);
	fwd_close(s, f);
	return 1;
}

void hutch_ports_write(const struct hutch_ports *ps, bool live, const char *key, struct hutch_jw *w)
{
	hutch_jw_open(w, key, '[');
	for (const struct fwd *f = ps ? ps->fwds : NULL; f; f = f->next)
		fwd_write(f, live, w);
	hutch_jw_close(w, '[');
}

cJSON *hutch_ports_json(const struct hutch_ports *ps, bool live)
{
	struct hutch_jw w;

	hutch_jw_init(&w, HUTCH_JW_CJSON_MAX);
	hutch_ports_write(ps, live, NULL, &w);
	return hutch_jw_to_cjson(&w);
}

void hutch_ports_close_all(struct sup *s)
{
	if (!s->ports)
		return;
	while (s->ports->fwds)
		fwd_close(s, s->ports->fwds);
	while (s->ports->conns)
		conn_close(s->ports->conns, true);
	hutch_cmds_on_message(&s->cmds, NULL, NULL);
	if (s->ports->spare_fd >= 0)
		close(s->ports->spare_fd);
	s->ports->spare_fd = -EBADF;
}
