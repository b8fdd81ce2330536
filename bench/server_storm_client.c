/* Boot-storm load client for bench/server_bench.py: many instances, each from its own source
 * address, each making a fixed request sequence (cloud-init's boot crawl) as fast as answers come.
 *
 *   server_storm_client PORT KEEPALIVE SEQUENCE_FILE SOURCES_FILE START_EPOCH_SECONDS
 *
 * SEQUENCE_FILE: "METHOD PATH" per line. SOURCES_FILE: one IPv4 source address per line (one
 * instance each). KEEPALIVE 0: a new connection per request, closed by the client after the
 * response (cloud-init 22.4's readurl: a requests.Session per call); 1: one connection per
 * instance. A PUT's response body becomes the X-aws-ec2-metadata-token of later requests.
 * All instances start at START_EPOCH_SECONDS. Prints one line per instance with its finish time
 * in seconds after the start, then "failures N connections M requests R p50_ms X p99_ms Y" (request
 * latency from writing the request to reading the whole response; a connect is not included).
 *
 * One thread, one epoll set, non-blocking sockets: the client costs far less per request than
 * the server it measures, unlike a Python client.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

#define BUF 65536

struct step { char method[8]; char path[512]; };
struct inst {
    int fd, step, sending, attempts;
    struct in_addr source;
    char token[256];
    char *buf; size_t len;
    double finished, sent_at;
};

static struct step *steps;
static int nsteps, keepalive, port, epfd;
static long failures, connections;
static double start;
static double *latencies;
static size_t nlat, caplat;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) { perror(what); exit(2); }

static void open_conn(struct inst *in) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    if (fd < 0) die("socket");
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr = in->source};
    if (bind(fd, (struct sockaddr *)&src, sizeof src) < 0) die("bind");
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(port)};
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&dst, sizeof dst) < 0 && errno != EINPROGRESS) die("connect");
    in->fd = fd;
    in->sending = 1;
    in->len = 0;
    connections++;
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = in};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
}

static void close_conn(struct inst *in) {
    if (in->fd < 0) return;
    epoll_ctl(epfd, EPOLL_CTL_DEL, in->fd, NULL);
    close(in->fd);
    in->fd = -1;
}

static void send_request(struct inst *in) {
    char req[2048], extra[320] = "";
    struct step *s = &steps[in->step];
    if (!strcmp(s->method, "PUT"))
        snprintf(extra, sizeof extra, "X-aws-ec2-metadata-token-ttl-seconds: 21600\r\n");
    else if (in->token[0])
        snprintf(extra, sizeof extra, "X-aws-ec2-metadata-token: %s\r\n", in->token);
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 169.254.169.254\r\nUser-Agent: Cloud-Init/22.4\r\n"
                     "Accept-Encoding: gzip, deflate\r\nAccept: */*\r\nConnection: keep-alive\r\n%s\r\n",
                     s->method, s->path, extra);
    in->sent_at = now();
    if (write(in->fd, req, n) != n) die("write (request did not fit the socket buffer)");
    in->sending = 0;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = in};
    epoll_ctl(epfd, EPOLL_CTL_MOD, in->fd, &ev);
}

static void next_step(struct inst *in, int ok) {
    if (!ok) failures++;
    in->step++;
    in->len = 0;
    if (!keepalive || !ok) close_conn(in);
    if (in->step == nsteps) {
        if (in->fd >= 0) close_conn(in);
        in->finished = now() - start;
        return;
    }
    if (in->fd < 0) open_conn(in);
    else send_request(in);
}

/* A whole response in the buffer? Then handle it and return 1. */
static int response_done(struct inst *in) {
    char *end = memmem(in->buf, in->len, "\r\n\r\n", 4);
    if (!end) return 0;
    size_t head = end - in->buf + 4, length = 0;
    for (char *line = strstr(in->buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n"))
        if (!strncasecmp(line + 2, "Content-Length:", 15)) length = strtoul(line + 17, NULL, 10);
    if (in->len < head + length) return 0;
    int status = atoi(in->buf + 9);
    if (nlat == caplat && !(latencies = realloc(latencies, (caplat = caplat ? caplat * 2 : 65536) * sizeof(double))))
        die("realloc");
    latencies[nlat++] = now() - in->sent_at;
    if (!strcmp(steps[in->step].method, "PUT") && status == 200 && length < sizeof in->token) {
        memcpy(in->token, in->buf + head, length);
        in->token[length] = 0;
    }
    next_step(in, status == 200);
    return 1;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s PORT KEEPALIVE SEQUENCE_FILE SOURCES_FILE START_EPOCH_SECONDS\n", argv[0]);
        return 2;
    }
    port = atoi(argv[1]);
    keepalive = atoi(argv[2]);
    FILE *f = fopen(argv[3], "r");
    if (!f) die(argv[3]);
    for (int capsteps = 0;; nsteps++) {
        if (nsteps == capsteps && !(steps = realloc(steps, (capsteps = capsteps ? 2 * capsteps : 256) * sizeof *steps)))
            die("realloc");
        if (fscanf(f, "%7s %511s", steps[nsteps].method, steps[nsteps].path) != 2) break;
    }
    fclose(f);
    f = fopen(argv[4], "r");
    if (!f) die(argv[4]);
    int count = 0, cap = 1024;
    struct inst *insts = calloc(cap, sizeof *insts);
    char address[64];
    while (fscanf(f, "%63s", address) == 1) {
        if (count == cap) insts = realloc(insts, (cap *= 2) * sizeof *insts);
        memset(&insts[count], 0, sizeof *insts);
        if (inet_pton(AF_INET, address, &insts[count].source) != 1) die("source address");
        insts[count].buf = malloc(BUF);
        insts[count].fd = -1;
        count++;
    }
    fclose(f);
    epfd = epoll_create1(0);
    start = atof(argv[5]);
    double wait = start - now();
    if (wait > 0) usleep((useconds_t)(wait * 1e6));
    for (int i = 0; i < count; i++) open_conn(&insts[i]);
    int done = 0;
    struct epoll_event events[512];
    while (done < count) {
        int n = epoll_wait(epfd, events, 512, 1000);
        for (int e = 0; e < n; e++) {
            struct inst *in = events[e].data.ptr;
            if (in->fd < 0) continue;
            if (in->sending) {
                int err = 0;
                socklen_t size = sizeof err;
                getsockopt(in->fd, SOL_SOCKET, SO_ERROR, &err, &size);
                if (err) {  /* refused or reset while connecting: try again, like cloud-init */
                    close_conn(in);
                    connections--;
                    if (++in->attempts > 100) { next_step(in, 0); if (in->step == nsteps) done++; continue; }
                    usleep(1000);
                    open_conn(in);
                    continue;
                }
                send_request(in);
                continue;
            }
            ssize_t got = read(in->fd, in->buf + in->len, BUF - 1 - in->len);
            if (got <= 0) {
                if (got < 0 && errno == EAGAIN) continue;
                close_conn(in);  /* closed before a whole response: count a failure, go on */
                in->fd = -1;
                next_step(in, 0);
                if (in->step == nsteps) done++;
                continue;
            }
            in->len += got;
            in->buf[in->len] = 0;
            int before = in->step;
            if (response_done(in) && in->step == nsteps && before < nsteps) done++;
        }
    }
    for (int i = 0; i < count; i++) printf("%.6f\n", insts[i].finished);
    qsort(latencies, nlat, sizeof(double), compare);
    printf("failures %ld connections %ld requests %zu p50_ms %.3f p99_ms %.3f\n", failures, connections, nlat,
           nlat ? latencies[nlat / 2] * 1e3 : 0.0, nlat ? latencies[(size_t)(nlat * 0.99)] * 1e3 : 0.0);
    return 0;
}
