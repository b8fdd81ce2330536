/* The metadata server's fast path for new connections, in C: this file holds the connections
 * and the Python types, fast_path_answer.c the answer lookup. Built by scripts/setup.sh into
 * _fast_path*.so beside them; fast_path.py is its Python side, and the server runs without it
 * when it is not built.
 *
 * A boot storm opens a connection per request, and most of those requests ask for an answer the
 * server already has. For them this module accepts the connection, reads the request, finds the
 * answer in the Python cache (a view of it: the peers Python registered, the instance's own
 * routes dict, checked against the cache's current instance on every request), takes the rate
 * limiter's token from Python's own bucket, sends the answer and keeps the connection (keep-alive)
 * in an epoll set of its own until the client closes it. Everything else, and every case it is
 * not sure of, is handed to Python with the bytes already read: a request that is not exactly one
 * "GET <plain path> HTTP/1.1" head whose header lines are byte for byte a set Python verified
 * (no IMDSv2 token, keep-alive, no body), a peer Python has not registered (only instances whose
 * answers depend on neither tokens, time nor timeline are), a path whose answer Python does not
 * keep in routes (a path the instance has not asked yet is routed by Python first, called from
 * here: ``fill``, MetadataApp.remembered, which renders and remembers it when it is an answer the
 * hot path would repeat), an exhausted rate-limit bucket (Python answers the 429), a source at
 * its connection cap. The connections it holds are counted in Python's ConnectionTable per source (the same
 * dict) and in ``open``; what it answered is counted here and drained by Python (metrics and
 * access log lines).
 */
#include "fast_path.h"

static char buffer[READ_SIZE];  /* one thread: the event loop's */
static PyTypeObject SharedType;

static void release(SharedObject *shared, Conn *conn, int close_it) {
    epoll_ctl(shared->epoll, EPOLL_CTL_DEL, conn->fd, NULL);
    if (close_it)
        close(conn->fd);
    fp_count_source(shared, conn->peer, -1);
    shared->open--;
    if (conn->prev)
        conn->prev->next = conn->next;
    else
        shared->held = conn->next;
    if (conn->next)
        conn->next->prev = conn->prev;
    Py_DECREF(conn->peer);
    Py_DECREF((PyObject *)conn->listener);
    Py_XDECREF(conn->pending);
    PyMem_Free(conn);
}

/* Keep a new connection here (in the per-source count and ``open``), or NULL (closed). */
static Conn *hold(ListenerObject *listener, int fd, PyObject *peer) {
    SharedObject *shared = listener->shared;
    Conn *conn = PyMem_Calloc(1, sizeof *conn);
    struct epoll_event event = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = conn};
    if (conn == NULL || epoll_ctl(shared->epoll, EPOLL_CTL_ADD, fd, &event) < 0) {
        PyMem_Free(conn);
        close(fd);
        return NULL;
    }
    conn->fd = fd;
    Py_INCREF(peer);
    conn->peer = peer;
    Py_INCREF((PyObject *)listener);
    conn->listener = listener;
    conn->next = shared->held;
    if (shared->held)
        shared->held->prev = conn;
    shared->held = conn;
    shared->open++;
    fp_count_source(shared, peer, 1);
    conn->last = fp_clock_seconds(CLOCK_MONOTONIC);
    return conn;
}

/* Answer on a connection: ``conn`` is NULL for a new one, held from here on if it stays open. */
static void answer(ListenerObject *listener, Conn *conn, int fd, PyObject *peer, Found *found, double started) {
    SharedObject *shared = listener->shared;
    Py_ssize_t sent = 0;
    int outcome = fp_send_from(fd, found->encoded, &sent);
    fp_record(shared, found, peer, started);
    if (outcome < 0) {
        if (conn)
            release(shared, conn, 1);
        else
            close(fd);
        return;
    }
    if (conn == NULL && (conn = hold(listener, fd, peer)) == NULL)
        return;
    conn->last = fp_clock_seconds(CLOCK_MONOTONIC);
    if (outcome == 0) {  /* the rest when the socket takes it; nothing read meanwhile */
        Py_INCREF(found->encoded);
        conn->pending = found->encoded;
        conn->sent = sent;
        struct epoll_event event = {.events = EPOLLOUT, .data.ptr = conn};
        epoll_ctl(shared->epoll, EPOLL_CTL_MOD, fd, &event);
    }
}

static int hand_off(PyObject *list, int fd, PyObject *peer, PyObject *data, ListenerObject *listener) {
    PyObject *item = Py_BuildValue("(iOOO)", fd, peer, data, (PyObject *)listener);
    if (item == NULL || PyList_Append(list, item) < 0) {
        Py_XDECREF(item);
        close(fd);
        return -1;
    }
    Py_DECREF(item);
    return 0;
}

/* ---- Listener ---------------------------------------------------------------------------- */

static int Listener_init(ListenerObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"shared", "fd", "peers", NULL};
    PyObject *shared, *peers;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OiO!", names, &shared, &self->fd, &PyDict_Type, &peers))
        return -1;
    if (!PyObject_TypeCheck(shared, &SharedType)) {
        PyErr_SetString(PyExc_TypeError, "shared must be a _fast_path.Shared");
        return -1;
    }
    Py_INCREF(shared);
    Py_XSETREF(self->shared, (SharedObject *)shared);
    Py_INCREF(peers);
    Py_XSETREF(self->peers, peers);
    return 0;
}

static int Listener_traverse(ListenerObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->shared);
    Py_VISIT(self->peers);
    return 0;
}

static int Listener_clear(ListenerObject *self) {
    Py_CLEAR(self->shared);
    Py_CLEAR(self->peers);
    return 0;
}

static void Listener_dealloc(ListenerObject *self) {
    PyObject_GC_UnTrack(self);
    Listener_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(Listener_accept_doc,
"accept() -> [(fd, peer, data, listener)]: accept waiting connections, answer those it can (and\n"
"hold those whose request has not come yet); the others for Python: data None (caps not checked,\n"
"nothing read) or the bytes read (within the caps). An OSError of accept itself is raised when\n"
"nothing was accepted.");

static PyObject *Listener_accept(ListenerObject *self, PyObject *unused) {
    SharedObject *shared = self->shared;
    if (shared == NULL) {
        PyErr_SetString(PyExc_ValueError, "listener not initialised");
        return NULL;
    }
    PyObject *handoffs = PyList_New(0);
    if (handoffs == NULL)
        return NULL;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        struct sockaddr_storage address;
        socklen_t length = sizeof address;
        int fd = accept4(self->fd, (struct sockaddr *)&address, &length, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
                break;
            if (PyList_GET_SIZE(handoffs) == 0) {
                Py_DECREF(handoffs);
                return PyErr_SetFromErrno(PyExc_OSError);
            }
            break;  /* raised on the next call */
        }
        PyObject *peer = fp_peer_string(&address, length);
        if (peer == NULL) {
            PyErr_Clear();
            close(fd);
            continue;
        }
        if (!fp_within_caps(shared, peer)) {
            hand_off(handoffs, fd, peer, Py_None, self);
            Py_DECREF(peer);
            continue;
        }
        ssize_t n;
        do {
            n = recv(fd, buffer, READ_SIZE, MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
        if (n <= 0) {
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                hold(self, fd, peer);  /* the request has not come yet: read when it does */
            else
                close(fd);  /* gone before a byte came: nothing to answer */
            Py_DECREF(peer);
            continue;
        }
        double started = fp_clock_seconds(CLOCK_MONOTONIC);
        Found found;
        if (fp_find_answer(self, peer, buffer, n, &found)) {
            answer(self, NULL, fd, peer, &found, started);
            fp_found_clear(&found);
        } else {
            PyObject *data = PyBytes_FromStringAndSize(buffer, n);
            if (data != NULL)
                hand_off(handoffs, fd, peer, data, self);
            else
                close(fd);
            Py_XDECREF(data);
        }
        Py_DECREF(peer);
    }
    PyErr_Clear();
    return handoffs;
}

static PyObject *Listener_hold(ListenerObject *self, PyObject *args) {
    int fd;
    PyObject *peer;
    if (!PyArg_ParseTuple(args, "iU", &fd, &peer))
        return NULL;
    if (self->shared == NULL) {
        PyErr_SetString(PyExc_ValueError, "listener not initialised");
        return NULL;
    }
    if (hold(self, fd, peer) == NULL)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyMethodDef Listener_methods[] = {
    {"accept", (PyCFunction)Listener_accept, METH_NOARGS, Listener_accept_doc},
    {"hold", (PyCFunction)Listener_hold, METH_VARARGS,
     "hold(fd, peer): keep a connection Python had (nothing left in it) and answer its requests here"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ListenerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_fast_path.Listener",
    .tp_doc = PyDoc_STR("Listener(shared, fd, peers): the fast path of one listening socket."),
    .tp_basicsize = sizeof(ListenerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Listener_init,
    .tp_dealloc = (destructor)Listener_dealloc,
    .tp_traverse = (traverseproc)Listener_traverse,
    .tp_clear = (inquiry)Listener_clear,
    .tp_methods = Listener_methods,
};

/* ---- Shared ------------------------------------------------------------------------------ */

static int Shared_init(SharedObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"per_source", "connections", "max_per_source", "max_connections", "idle_timeout",
                            "instances", "limiter", "rate", "burst", "response_type", "bounds", "log", NULL};
    PyObject *per_source, *connections, *instances, *limiter, *response_type, *bounds;
    int log;
    if (self->epoll >= 0) {
        PyErr_SetString(PyExc_RuntimeError, "Shared is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!nndO!OddO!O!p", names, &PyDict_Type, &per_source,
                                     &PySet_Type, &connections, &self->max_per_source, &self->max_connections,
                                     &self->idle_timeout, &PyDict_Type, &instances, &limiter, &self->rate,
                                     &self->burst, &PyType_Type, &response_type, &PyTuple_Type, &bounds, &log))
        return -1;
    if (PyTuple_GET_SIZE(bounds) > MAX_BOUNDS) {
        PyErr_SetString(PyExc_ValueError, "too many histogram bounds");
        return -1;
    }
    self->nbounds = (int)PyTuple_GET_SIZE(bounds);
    for (int i = 0; i < self->nbounds; i++) {
        self->bounds[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(bounds, i));
        if (PyErr_Occurred())
            return -1;
    }
    self->epoll = epoll_create1(EPOLL_CLOEXEC);
    if (self->epoll < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    self->counts = PyDict_New();
    self->log = log ? PyList_New(0) : NULL;
    if (self->counts == NULL || (log && self->log == NULL))
        return -1;
    Py_INCREF(per_source);
    self->per_source = per_source;
    Py_INCREF(connections);
    self->connections = connections;
    Py_INCREF(instances);
    self->instances = instances;
    Py_INCREF(limiter);
    self->limiter = limiter;
    Py_INCREF(response_type);
    self->response_type = response_type;
    return 0;
}

static PyObject *Shared_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    SharedObject *self = (SharedObject *)type->tp_alloc(type, 0);
    if (self != NULL)
        self->epoll = -1;
    return (PyObject *)self;
}

static int Shared_traverse(SharedObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->per_source);
    Py_VISIT(self->connections);
    Py_VISIT(self->instances);
    Py_VISIT(self->limiter);
    Py_VISIT(self->response_type);
    Py_VISIT(self->counts);
    Py_VISIT(self->log);
    for (int i = 0; i < self->ntemplates; i++)
        Py_VISIT(self->templates[i]);
    for (Conn *conn = self->held; conn; conn = conn->next) {
        Py_VISIT(conn->peer);
        Py_VISIT((PyObject *)conn->listener);
        Py_VISIT(conn->pending);
    }
    return 0;
}

static void close_all(SharedObject *self) {
    while (self->held)
        release(self, self->held, 1);
}

static int Shared_clear(SharedObject *self) {
    if (self->per_source != NULL)
        close_all(self);
    Py_CLEAR(self->per_source);
    Py_CLEAR(self->connections);
    Py_CLEAR(self->instances);
    Py_CLEAR(self->limiter);
    Py_CLEAR(self->response_type);
    Py_CLEAR(self->counts);
    Py_CLEAR(self->log);
    for (int i = 0; i < self->ntemplates; i++)
        Py_CLEAR(self->templates[i]);
    self->ntemplates = 0;
    return 0;
}

static void Shared_dealloc(SharedObject *self) {
    PyObject_GC_UnTrack(self);
    Shared_clear(self);
    if (self->epoll >= 0)
        close(self->epoll);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ready(SharedObject *self) {
    if (self->per_source == NULL) {
        PyErr_SetString(PyExc_ValueError, "Shared not initialised");
        return 0;
    }
    return 1;
}

PyDoc_STRVAR(Shared_service_doc,
"service() -> [(fd, peer, data, listener)]: handle what happened on the connections held here (closed,\n"
"another request answered, output sent); the connections whose request is Python's, with the\n"
"bytes read (no longer counted here).");

static PyObject *Shared_service(SharedObject *self, PyObject *unused) {
    if (!ready(self))
        return NULL;
    struct epoll_event events[512];
    int count = epoll_wait(self->epoll, events, 512, 0);
    PyObject *handoffs = PyList_New(0);
    if (handoffs == NULL)
        return NULL;
    for (int i = 0; i < count; i++) {
        Conn *conn = events[i].data.ptr;
        if (conn->pending != NULL) {
            int outcome = fp_send_from(conn->fd, conn->pending, &conn->sent);
            if (outcome < 0) {
                release(self, conn, 1);
            } else if (outcome > 0) {
                Py_CLEAR(conn->pending);
                conn->last = fp_clock_seconds(CLOCK_MONOTONIC);
                struct epoll_event event = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = conn};
                epoll_ctl(self->epoll, EPOLL_CTL_MOD, conn->fd, &event);
            }
            continue;
        }
        ssize_t n;
        do {
            n = recv(conn->fd, buffer, READ_SIZE, MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n <= 0) {  /* the client closed its side, or the connection failed */
            release(self, conn, 1);
            continue;
        }
        conn->last = fp_clock_seconds(CLOCK_MONOTONIC);
        Found found;
        if (fp_find_answer(conn->listener, conn->peer, buffer, n, &found)) {
            answer(conn->listener, conn, conn->fd, conn->peer, &found, conn->last);
            fp_found_clear(&found);
            continue;
        }
        PyObject *data = PyBytes_FromStringAndSize(buffer, n);
        int fd = conn->fd;
        PyObject *peer = conn->peer;
        ListenerObject *listener = conn->listener;
        Py_INCREF(peer);
        Py_INCREF((PyObject *)listener);
        release(self, conn, data == NULL);
        if (data != NULL)
            hand_off(handoffs, fd, peer, data, listener);
        Py_XDECREF(data);
        Py_DECREF(peer);
        Py_DECREF((PyObject *)listener);
    }
    PyErr_Clear();
    return handoffs;
}

static PyObject *Shared_sweep(SharedObject *self, PyObject *arg) {
    if (!ready(self))
        return NULL;
    double now = PyFloat_AsDouble(arg);
    if (PyErr_Occurred())
        return NULL;
    long closed = 0;
    Conn *conn = self->held;
    while (conn) {
        Conn *next = conn->next;
        if (now - conn->last > self->idle_timeout) {
            release(self, conn, 1);
            closed++;
        }
        conn = next;
    }
    return PyLong_FromLong(closed);
}

static PyObject *Shared_close_all(SharedObject *self, PyObject *unused) {
    if (!ready(self))
        return NULL;
    close_all(self);
    Py_RETURN_NONE;
}

static PyObject *Shared_add_template(SharedObject *self, PyObject *lines) {
    if (!PyBytes_CheckExact(lines)) {
        PyErr_SetString(PyExc_TypeError, "header lines must be bytes");
        return NULL;
    }
    for (int i = 0; i < self->ntemplates; i++)
        if (PyObject_RichCompareBool(self->templates[i], lines, Py_EQ) == 1)
            Py_RETURN_TRUE;
    if (self->ntemplates >= MAX_TEMPLATES)
        Py_RETURN_FALSE;
    Py_INCREF(lines);
    self->templates[self->ntemplates++] = lines;
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(Shared_drain_doc,
"drain() -> (histogram, counts, latency_sum, latency_count, log): what was answered here since the\n"
"last drain: per-bound counts (metrics.BUCKETS, then +Inf), {(path, status): n}, and the access-log\n"
"entries (tuples as AccessLog keeps them; None when the log is off).");

static PyObject *Shared_drain(SharedObject *self, PyObject *unused) {
    if (!ready(self))
        return NULL;
    PyObject *histogram = PyList_New(self->nbounds + 1);
    PyObject *counts = PyDict_New(), *log = self->log ? PyList_New(0) : NULL;
    if (histogram == NULL || counts == NULL || (self->log && log == NULL)) {
        Py_XDECREF(histogram);
        Py_XDECREF(counts);
        Py_XDECREF(log);
        return NULL;
    }
    for (int i = 0; i <= self->nbounds; i++) {
        PyList_SET_ITEM(histogram, i, PyLong_FromLongLong(self->histogram[i]));
        self->histogram[i] = 0;
    }
    PyObject *result = Py_BuildValue("(NNdLN)", histogram, self->counts, self->latency_sum, self->latency_count,
                                     self->log ? self->log : Py_NewRef(Py_None));
    self->counts = counts;
    self->log = log;
    self->latency_sum = 0;
    self->latency_count = 0;
    return result;
}

static PyObject *Shared_fileno(SharedObject *self, PyObject *unused) {
    return PyLong_FromLong(self->epoll);
}

static PyMethodDef Shared_methods[] = {
    {"service", (PyCFunction)Shared_service, METH_NOARGS, Shared_service_doc},
    {"sweep", (PyCFunction)Shared_sweep, METH_O, "sweep(now) -> closed: close held connections idle too long"},
    {"close_all", (PyCFunction)Shared_close_all, METH_NOARGS, "close every held connection"},
    {"add_template", (PyCFunction)Shared_add_template, METH_O,
     "add_template(lines) -> bool: header lines Python verified (False: the table is full)"},
    {"drain", (PyCFunction)Shared_drain, METH_NOARGS, Shared_drain_doc},
    {"fileno", (PyCFunction)Shared_fileno, METH_NOARGS, "the epoll set of the held connections"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Shared_members[] = {
    {"open", T_PYSSIZET, offsetof(SharedObject, open), READONLY, "connections held here"},
    {"answered", T_LONGLONG, offsetof(SharedObject, answered), READONLY, "requests answered here"},
    {"templates", T_INT, offsetof(SharedObject, ntemplates), READONLY, "verified sets of header lines"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject SharedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_fast_path.Shared",
    .tp_doc = PyDoc_STR("Shared(...): what the fast listeners of one server share (see fast_path.py)."),
    .tp_basicsize = sizeof(SharedObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = Shared_new,
    .tp_init = (initproc)Shared_init,
    .tp_dealloc = (destructor)Shared_dealloc,
    .tp_traverse = (traverseproc)Shared_traverse,
    .tp_clear = (inquiry)Shared_clear,
    .tp_methods = Shared_methods,
    .tp_members = Shared_members,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fast_path", "The metadata server's fast path for new connections (fast_path.c).", -1,
    NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fast_path(void) {
    if (fp_init_answers() < 0)
        return NULL;
    if (PyType_Ready(&ListenerType) < 0 || PyType_Ready(&SharedType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ListenerType);
    Py_INCREF(&SharedType);
    if (PyModule_AddObject(m, "Listener", (PyObject *)&ListenerType) < 0
        || PyModule_AddObject(m, "Shared", (PyObject *)&SharedType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
