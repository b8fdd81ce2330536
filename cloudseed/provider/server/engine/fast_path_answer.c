/* The fast path's answer lookup (fast_path.c holds the connections): is a request one whose
 * answer Python already has, and may C give it (the peer, the header lines, the rate limit)? */
#include "fast_path.h"

char fp_plain[256];
PyObject *fp_s_encode, *fp_s_encoded, *fp_s_ip_ttl, *fp_s_status, *fp_s_body, *fp_s_buckets;

int fp_init_answers(void) {
    /* a target's bytes that llhttp takes and that leave it its own path: no '%' (decoded),
     * no '?' (query), no '#', nothing that needs escaping */
    const char *bytes = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/:@!$&'()*+,;=";
    for (const char *c = bytes; *c; c++)
        fp_plain[(unsigned char)*c] = 1;
    fp_s_encode = PyUnicode_InternFromString("encode");
    fp_s_encoded = PyUnicode_InternFromString("_encoded");
    fp_s_ip_ttl = PyUnicode_InternFromString("ip_ttl");
    fp_s_status = PyUnicode_InternFromString("status");
    fp_s_body = PyUnicode_InternFromString("body");
    fp_s_buckets = PyUnicode_InternFromString("buckets");
    return fp_s_encode && fp_s_encoded && fp_s_ip_ttl && fp_s_status && fp_s_body && fp_s_buckets ? 0 : -1;
}

double fp_clock_seconds(clockid_t clock) {
    struct timespec now;
    clock_gettime(clock, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

void fp_found_clear(Found *found) {
    Py_CLEAR(found->encoded);
    Py_CLEAR(found->path);
    Py_CLEAR(found->status);
    Py_CLEAR(found->instance_id);
}

/* The peer as Python's accept names it (numeric host; "::ffff:" taken off a mapped IPv4 address). */
PyObject *fp_peer_string(struct sockaddr_storage *address, socklen_t length) {
    char host[NI_MAXHOST];
    if (address->ss_family == AF_INET) {
        if (!inet_ntop(AF_INET, &((struct sockaddr_in *)address)->sin_addr, host, sizeof host))
            return NULL;
        return PyUnicode_FromString(host);
    }
    if (getnameinfo((struct sockaddr *)address, length, host, sizeof host, NULL, 0, NI_NUMERICHOST) != 0)
        return NULL;
    if (strncmp(host, "::ffff:", 7) == 0)
        return PyUnicode_FromString(host + 7);
    return PyUnicode_FromString(host);
}

Py_ssize_t fp_source_count(SharedObject *shared, PyObject *peer) {
    PyObject *count = PyDict_GetItemWithError(shared->per_source, peer);
    if (count == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t n = PyLong_AsSsize_t(count);
    if (n < 0) {
        PyErr_Clear();
        return 0;
    }
    return n;
}

void fp_count_source(SharedObject *shared, PyObject *peer, int delta) {
    Py_ssize_t n = fp_source_count(shared, peer) + delta;
    if (n > 0) {
        PyObject *value = PyLong_FromSsize_t(n);
        if (value == NULL || PyDict_SetItem(shared->per_source, peer, value) < 0)
            PyErr_Clear();
        Py_XDECREF(value);
    } else if (PyDict_DelItem(shared->per_source, peer) < 0) {
        PyErr_Clear();
    }
}

/* Whether a new connection from ``peer`` is clearly within the caps (else Python decides:
 * it refuses, or admits a source exempt from the per-source cap). */
int fp_within_caps(SharedObject *shared, PyObject *peer) {
    if (PySet_GET_SIZE(shared->connections) + shared->open >= shared->max_connections)
        return 0;
    return !shared->max_per_source || fp_source_count(shared, peer) < shared->max_per_source;
}

/* Take one token from the peer's bucket in Python's RateLimiter, as RateLimiter.retry_after
 * does; 0 (bucket untouched) when there is no bucket yet or it is empty: Python answers then. */
int fp_take_token(SharedObject *shared, PyObject *key) {
    if (shared->limiter == Py_None)
        return 1;
    PyObject *buckets = PyObject_GetAttr(shared->limiter, fp_s_buckets);
    if (buckets == NULL || !PyDict_Check(buckets)) {
        Py_XDECREF(buckets);
        PyErr_Clear();
        return 0;
    }
    int taken = 0;
    PyObject *bucket = PyDict_GetItemWithError(buckets, key);
    if (bucket != NULL && PyList_CheckExact(bucket) && PyList_GET_SIZE(bucket) == 2) {
        double tokens = PyFloat_AsDouble(PyList_GET_ITEM(bucket, 0));
        double last = PyFloat_AsDouble(PyList_GET_ITEM(bucket, 1));
        double now = fp_clock_seconds(CLOCK_MONOTONIC);
        if (!PyErr_Occurred()) {
            tokens += (now - last) * shared->rate;
            if (tokens > shared->burst)
                tokens = shared->burst;
            if (tokens >= 1.0) {
                PyObject *left = PyFloat_FromDouble(tokens - 1.0), *when = PyFloat_FromDouble(now);
                if (left != NULL && when != NULL) {
                    PyList_SetItem(bucket, 0, left);  /* steals */
                    PyList_SetItem(bucket, 1, when);
                    taken = 1;
                } else {
                    Py_XDECREF(left);
                    Py_XDECREF(when);
                }
            }
        }
    }
    PyErr_Clear();
    Py_DECREF(buckets);
    return taken;
}

/* The cached answer to ``data`` (one read) from ``peer``: 1 and ``found`` filled, or 0: Python's. */
int fp_find_answer(ListenerObject *listener, PyObject *peer, const char *data, Py_ssize_t size, Found *found) {
    SharedObject *shared = listener->shared;
    memset(found, 0, sizeof *found);
    if (size < 20 || memcmp(data, "GET /", 5) != 0 || memcmp(data + size - 4, "\r\n\r\n", 4) != 0)
        return 0;
    const char *target = data + 4, *p = target, *end = data + size;
    while (p < end && fp_plain[(unsigned char)*p])
        p++;
    Py_ssize_t target_size = p - target;
    if (target_size > MAX_TARGET || end - p < 11 || memcmp(p, " HTTP/1.1\r\n", 11) != 0)
        return 0;
    /* the header lines: byte for byte a set Python verified (so the head ends here, at its
     * first blank line, holds no body, no IMDSv2 token, and keeps the connection alive) */
    const char *lines = p + 11;
    Py_ssize_t lines_size = end - lines;
    int verified = 0;
    for (int i = 0; i < shared->ntemplates && !verified; i++) {
        PyObject *template = shared->templates[i];
        verified = PyBytes_GET_SIZE(template) == lines_size
                   && memcmp(PyBytes_AS_STRING(template), lines, (size_t)lines_size) == 0;
    }
    if (!verified)
        return 0;
    PyObject *entry = PyDict_GetItemWithError(listener->peers, peer);
    if (entry == NULL || !PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) < 4 || PyTuple_GET_SIZE(entry) > 5) {
        PyErr_Clear();
        return 0;
    }
    Py_INCREF(entry);  /* held while it is read */
    PyObject *response = NULL;
    int taken = 0;  /* the rate limiter's token */
    PyObject *instance = PyTuple_GET_ITEM(entry, 0), *instance_id = PyTuple_GET_ITEM(entry, 1);
    PyObject *key = PyTuple_GET_ITEM(entry, 2), *routes = PyTuple_GET_ITEM(entry, 3);
    if (PyDict_GetItemWithError(shared->instances, instance_id) != instance) {
        /* the registry changed it (or it was forgotten): Python loads it again and registers anew */
        PyErr_Clear();
        if (PyDict_DelItem(listener->peers, peer) < 0)
            PyErr_Clear();
        goto handoff;
    }
    if (!PyDict_CheckExact(routes))
        goto handoff;
    found->path = PyUnicode_DecodeASCII(target, target_size, NULL);
    if (found->path == NULL)
        goto handoff;
    response = PyDict_GetItemWithError(routes, found->path);
    if (response != NULL) {
        Py_INCREF(response);
    } else {
        /* a path this instance has not been asked yet: Python routes it as its hot path would
         * (MetadataApp.remembered) and gives the answer it now keeps in routes, or None (Python's) */
        PyObject *fill = PyTuple_GET_SIZE(entry) == 5 ? PyTuple_GET_ITEM(entry, 4) : Py_None;
        if (PyErr_Occurred() || fill == Py_None)
            goto handoff;
        response = PyObject_CallFunctionObjArgs(fill, instance, found->path, NULL);
        if (response == NULL || response == Py_None)
            goto handoff;
    }
    if ((PyObject *)Py_TYPE(response) != shared->response_type) {
        /* a factory (an answer made per request: meta_data.json's fresh random seed), called as
         * the Python hot path calls it, once the rate limit let the request through */
        if (!PyCallable_Check(response) || !fp_take_token(shared, key))
            goto handoff;
        Py_SETREF(response, PyObject_CallNoArgs(response));
        if (response == NULL || (PyObject *)Py_TYPE(response) != shared->response_type)
            goto handoff;  /* Python answers (a factory that failed: its 500) */
        taken = 1;
    }
    PyObject *ip_ttl = PyObject_GetAttr(response, fp_s_ip_ttl);
    int plain_answer = ip_ttl == Py_None;
    Py_XDECREF(ip_ttl);
    if (!plain_answer)
        goto handoff;
    found->encoded = PyObject_GetAttr(response, fp_s_encoded);
    if (found->encoded == Py_None) {  /* not sent yet: encoded (once) as Connection does, encode(True) */
        Py_DECREF(found->encoded);
        found->encoded = PyObject_CallMethodObjArgs(response, fp_s_encode, Py_True, NULL);
    }
    if (found->encoded == NULL || !PyBytes_CheckExact(found->encoded))
        goto handoff;
    found->status = PyObject_GetAttr(response, fp_s_status);
    PyObject *body = PyObject_GetAttr(response, fp_s_body);
    if (found->status == NULL || body == NULL || !PyBytes_Check(body)) {
        Py_XDECREF(body);
        goto handoff;
    }
    found->size = PyBytes_GET_SIZE(body);
    Py_DECREF(body);
    if (!taken && !fp_take_token(shared, key))
        goto handoff;
    Py_INCREF(instance_id);
    found->instance_id = instance_id;
    Py_DECREF(response);
    Py_DECREF(entry);
    return 1;
handoff:
    PyErr_Clear();
    fp_found_clear(found);
    Py_XDECREF(response);
    Py_DECREF(entry);
    return 0;
}

/* Count an answered request for /metrics and, when the access log is on, its line. */
void fp_record(SharedObject *shared, Found *found, PyObject *peer, double started) {
    double seconds = fp_clock_seconds(CLOCK_MONOTONIC) - started;
    int bucket = 0;
    while (bucket < shared->nbounds && shared->bounds[bucket] < seconds)  /* bisect_left */
        bucket++;
    shared->histogram[bucket]++;
    shared->latency_sum += seconds;
    shared->latency_count++;
    shared->answered++;
    PyObject *key = PyTuple_Pack(2, found->path, found->status);
    if (key != NULL) {
        PyObject *count = PyDict_GetItemWithError(shared->counts, key);
        PyObject *value = PyLong_FromLongLong((count ? PyLong_AsLongLong(count) : 0) + 1);
        if (value != NULL)
            PyDict_SetItem(shared->counts, key, value);
        Py_XDECREF(value);
        Py_DECREF(key);
    }
    if (shared->log != NULL) {
        PyObject *line = Py_BuildValue("(dOOsOOnd)", fp_clock_seconds(CLOCK_REALTIME), peer, found->instance_id,
                                       "GET", found->path, found->status, found->size, seconds);
        if (line != NULL)
            PyList_Append(shared->log, line);
        Py_XDECREF(line);
    }
    PyErr_Clear();
}

/* Send ``encoded`` (from offset ``sent``): 1 all sent, 0 the socket's buffer is full (the rest
 * waits for EPOLLOUT), -1 the connection failed. */
int fp_send_from(int fd, PyObject *encoded, Py_ssize_t *sent) {
    Py_ssize_t size = PyBytes_GET_SIZE(encoded);
    while (*sent < size) {
        ssize_t n = send(fd, PyBytes_AS_STRING(encoded) + *sent, (size_t)(size - *sent), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
        }
        *sent += n;
    }
    return 1;
}
