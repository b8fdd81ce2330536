/* What fast_path.c and fast_path_answer.c share: the objects' layouts and the answer lookup
 * (see fast_path.c for what the fast path is). */
#ifndef CLOUDSEED_FAST_PATH_H
#define CLOUDSEED_FAST_PATH_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READ_SIZE 65536       /* what the Python transport reads at once */
#define MAX_TEMPLATES 16      /* verified sets of header lines */
#define MAX_TARGET 256        /* instance_cache.MAX_ROUTE_PATH */
#define ACCEPT_BATCH 256      /* connections accepted per call, as transport.py */
#define MAX_BOUNDS 32         /* latency histogram bounds (metrics.BUCKETS) */


extern char fp_plain[256];  /* 1: a byte a target may hold and still be its own path */
extern PyObject *fp_s_encode, *fp_s_encoded, *fp_s_ip_ttl, *fp_s_status, *fp_s_body, *fp_s_buckets;

struct ListenerObject;

typedef struct Conn {         /* a connection answered here and kept open */
    int fd;
    PyObject *peer;           /* str */
    struct ListenerObject *listener;
    double last;              /* monotonic seconds of its last activity */
    PyObject *pending;        /* bytes the socket did not take yet, or NULL */
    Py_ssize_t sent;          /* of pending */
    struct Conn *prev, *next;
} Conn;

typedef struct {
    PyObject_HEAD
    int epoll;
    PyObject *per_source;     /* ConnectionTable.per_source (shared) */
    PyObject *connections;    /* ConnectionTable.connections (their number counts in the cap) */
    Py_ssize_t max_per_source, max_connections;
    double idle_timeout;
    PyObject *instances;      /* InstanceCache.instances */
    PyObject *limiter;        /* RateLimiter, or None when there is no rate limit */
    double rate, burst;
    PyObject *response_type;
    double bounds[MAX_BOUNDS];
    int nbounds;
    long long histogram[MAX_BOUNDS + 1];
    double latency_sum;
    long long latency_count;
    PyObject *counts;         /* (path, status) -> answered since the last drain */
    PyObject *log;            /* access-log entries since the last drain; NULL: no access log */
    PyObject *templates[MAX_TEMPLATES];
    int ntemplates;
    Conn *held;
    Py_ssize_t open;
    long long answered;
} SharedObject;

typedef struct ListenerObject {
    PyObject_HEAD
    SharedObject *shared;
    int fd;
    PyObject *peers;          /* peer -> (instance, instance id, rate-limit bucket key, routes, fill) */
} ListenerObject;

typedef struct {              /* the answer found for a request (new references) */
    PyObject *encoded, *path, *status, *instance_id;
    Py_ssize_t size;
} Found;

int fp_init_answers(void);
double fp_clock_seconds(clockid_t clock);
void fp_found_clear(Found *found);
PyObject *fp_peer_string(struct sockaddr_storage *address, socklen_t length);
Py_ssize_t fp_source_count(SharedObject *shared, PyObject *peer);
void fp_count_source(SharedObject *shared, PyObject *peer, int delta);
int fp_within_caps(SharedObject *shared, PyObject *peer);
int fp_take_token(SharedObject *shared, PyObject *key);
int fp_find_answer(ListenerObject *listener, PyObject *peer, const char *data, Py_ssize_t size, Found *found);
void fp_record(SharedObject *shared, Found *found, PyObject *peer, double started);
int fp_send_from(int fd, PyObject *encoded, Py_ssize_t *sent);

#endif
