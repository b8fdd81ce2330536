/* Boot-storm load client for bench/server_bench.py and the multi-host tests: many instances, each
 * from its own source address, each making a fixed request sequence (cloud-init's boot crawl) as
 * fast as answers come.
 *
 *   server_storm_client PORT KEEPALIVE SEQUENCE_FILE SOURCES_FILE START_EPOCH_SECONDS
 *                       [DESTINATION [RETRY_SECONDS]]
 *
 * SEQUENCE_FILE: "METHOD PATH [check]" per line; a step marked "check" must answer a body holding
 * the instance's EXPECT text (else it is counted as a wrong answer: another instance's data).
 * SOURCES_FILE: "ADDRESS [EXPECT [START_OFFSET_SECONDS]]" per line, one instance each (IPv4).
 * KEEPALIVE 0: a new connection per request, closed by the client after the response (cloud-init
 * 22.4's readurl: a requests.Session per call); 1: one connection per instance. A PUT's response
 * body becomes the X-aws-ec2-metadata-token of later requests. Instance i starts at
 * START_EPOCH_SECONDS + its offset. DESTINATION: the server's IPv4 address (default 127.0.0.1).
 *
 * RETRY_SECONDS 0 (default): a failed request counts as a failure and the instance goes on (a
 * refused connect is retried at once, up to 100 times). RETRY_SECONDS > 0: the agent's way: a
 * request that fails (refused, reset, no whole answer within 15 s, a status other than 200) is
 * tried again after 0.1, 0.2, 0.4, 0.8, then every 1 s, until RETRY_SECONDS after the instance
 * started; only then does the step count as failed.
 *
 * Prints one line per instance, "FINISH START ATTEMPTS_FAILED STEPS_FAILED WRONG FIRST CONNECT_MAX
 * SLOW_CONNECTS LATENCY_MAX" (seconds after the common start; FINISH -1 if it never finished; FIRST:
 * when its first whole answer came, -1 if none; CONNECT_MAX: its longest wait from connect() to a
 * writable socket, SLOW_CONNECTS how many waited over 0.5 s: a lost SYN is retransmitted after 1 s;
 * LATENCY_MAX: its longest request, written to whole answer), one "fail TIME STATUS" line per failed attempt
 * (STATUS 0: no answer), then "failures N connections M requests R p50_ms X p99_ms Y wrong W"
 * (request latency from writing the request to reading the whole response; a connect is not
 * included; failures counts failed steps).
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
#define REQUEST_TIMEOUT 15.0

struct step { char method[8]; char path[512]; int check; };
struct inst {
    int fd, step, sending, attempts, tries, started, done;
    struct in_addr source;
    char token[256], expect[128];
    char *buf; size_t len;
    double offset, begun, finished, sent_at, retry_at, connect_at, first, connect_max, latency_max;
    long failed_attempts, failed_steps, wrong, slow_connects;
};

static struct step *steps;
static int nsteps, keepalive, port, epfd, count, done;
static long failures, connections, wrong;
static double start, retry_seconds;
static struct in_addr destination;
static double *latencies;
static size_t nlat, caplat;
static struct inst *insts;

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
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr = destination};
    if (connect(fd, (struct sockaddr *)&dst, sizeof dst) < 0 && errno != EINPROGRESS) die("connect");
    in->fd = fd;
    in->sending = 1;
    in->len = 0;
    in->sent_at = in->connect_at = now();
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

static void finish(struct inst *in) {
    if (in->fd >= 0) close_conn(in);
    in->finished = now() - start;
    in->done = 1;
    done++;
}

static void next_step(struct inst *in, int ok, int status) {
    if (!ok) {
        double t = now();
        in->failed_attempts++;
        printf("fail %.6f %d\n", t - start, status);
        close_conn(in);
        if (retry_seconds > 0 && t - in->begun < retry_seconds) {  /* the agent retries */
            double delay = in->tries < 4 ? 0.1 * (1 << in->tries) : 1.0;
            in->tries++;
            in->len = 0;
            in->retry_at = t + delay;
            return;
        }
        failures++;
        in->failed_steps++;
    }
    in->tries = 0;
    in->step++;
    in->len = 0;
    if (!keepalive || !ok) close_conn(in);
    if (in->step == nsteps) {
        finish(in);
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
    double t = now();
    latencies[nlat++] = t - in->sent_at;
    if (t - in->sent_at > in->latency_max) in->latency_max = t - in->sent_at;
    if (in->first < 0) in->first = t - start;
    if (!strcmp(steps[in->step].method, "PUT") && status == 200 && length < sizeof in->token) {
        memcpy(in->token, in->buf + head, length);
        in->token[length] = 0;
    }
    if (status == 200 && steps[in->step].check && in->expect[0]) {
        in->buf[head + length] = 0;
        if (!strstr(in->buf + head, in->expect)) { in->wrong++; wrong++; }
    }
    next_step(in, status == 200, status);
    return 1;
}

/* Instances due to start, retries due, requests past their deadline; the next due time. */
static double timers(void) {
    double t = now(), next = t + 1.0;
    for (int i = 0; i < count; i++) {
        struct inst *in = &insts[i];
        if (in->done) continue;
        if (!in->started) {
            if (start + in->offset <= t) {
                in->started = 1;
                in->begun = t;
                open_conn(in);
            } else if (start + in->offset < next) next = start + in->offset;
            continue;
        }
        if (in->retry_at > 0) {
            if (in->retry_at <= t) { in->retry_at = 0; open_conn(in); }
            else if (in->retry_at < next) next = in->retry_at;
            continue;
        }
        if (retry_seconds > 0 && in->fd >= 0 && t - in->sent_at > REQUEST_TIMEOUT) next_step(in, 0, 0);
    }
    return next;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 6 || argc > 8) {
        fprintf(stderr, "usage: %s PORT KEEPALIVE SEQUENCE_FILE SOURCES_FILE START_EPOCH_SECONDS "
                        "[DESTINATION [RETRY_SECONDS]]\n", argv[0]);
        return 2;
    }
    port = atoi(argv[1]);
    keepalive = atoi(argv[2]);
    destination.s_addr = htonl(INADDR_LOOPBACK);
    if (argc > 6 && inet_pton(AF_INET, argv[6], &destination) != 1) die("destination address");
    retry_seconds = argc > 7 ? atof(argv[7]) : 0;
    FILE *f = fopen(argv[3], "r");
    if (!f) die(argv[3]);
    char line[1024];
    for (int capsteps = 0; fgets(line, sizeof line, f);) {
        if (nsteps == capsteps && !(steps = realloc(steps, (capsteps = capsteps ? 2 * capsteps : 256) * sizeof *steps)))
            die("realloc");
        char mark[16] = "";
        if (sscanf(line, "%7s %511s %15s", steps[nsteps].method, steps[nsteps].path, mark) < 2) continue;
        steps[nsteps].check = !strcmp(mark, "check");
        nsteps++;
    }
    fclose(f);
    f = fopen(argv[4], "r");
    if (!f) die(argv[4]);
    int cap = 1024;
    insts = calloc(cap, sizeof *insts);
    while (fgets(line, sizeof line, f)) {
        char address[64], expect[128] = "";
        double offset = 0;
        if (sscanf(line, "%63s %127s %lf", address, expect, &offset) < 1) continue;
        if (count == cap) insts = realloc(insts, (cap *= 2) * sizeof *insts);
        struct inst *in = &insts[count];
        memset(in, 0, sizeof *in);
        if (inet_pton(AF_INET, address, &in->source) != 1) die("source address");
        snprintf(in->expect, sizeof in->expect, "%s", expect);
        in->offset = offset;
        in->buf = malloc(BUF);
        in->fd = -1;
        in->first = -1;
        count++;
    }
    fclose(f);
    epfd = epoll_create1(0);
    start = atof(argv[5]);
    double wait = start - now();
    if (wait > 0) usleep((useconds_t)(wait * 1e6));
    struct epoll_event events[512];
    double next = 0;
    while (done < count) {
        double t = now();
        if (t >= next) {  /* starts, retries and deadlines: a scan at most every 2 ms */
            next = timers();
            if (next < t + 0.002) next = t + 0.002;
        }
        int timeout = (int)((next - now()) * 1000) + 1;
        int n = epoll_wait(epfd, events, 512, timeout < 1 ? 1 : timeout > 1000 ? 1000 : timeout);
        for (int e = 0; e < n; e++) {
            struct inst *in = events[e].data.ptr;
            if (in->fd < 0 || in->done) continue;
            if (in->sending) {
                int err = 0;
                socklen_t size = sizeof err;
                getsockopt(in->fd, SOL_SOCKET, SO_ERROR, &err, &size);
                if (err) {  /* refused or reset while connecting: try again, like cloud-init */
                    if (retry_seconds > 0) { next_step(in, 0, 0); continue; }
                    close_conn(in);
                    connections--;
                    if (++in->attempts > 100) { next_step(in, 0, 0); continue; }
                    usleep(1000);
                    open_conn(in);
                    continue;
                }
                double waited = now() - in->connect_at;
                if (waited > in->connect_max) in->connect_max = waited;
                if (waited > 0.5) in->slow_connects++;
                send_request(in);
                continue;
            }
            ssize_t got = read(in->fd, in->buf + in->len, BUF - 1 - in->len);
            if (got <= 0) {
                if (got < 0 && errno == EAGAIN) continue;
                close_conn(in);  /* closed before a whole response: a failed attempt */
                next_step(in, 0, 0);
                continue;
            }
            in->len += got;
            in->buf[in->len] = 0;
            response_done(in);
        }
    }
    for (int i = 0; i < count; i++)
        printf("%.6f %.6f %ld %ld %ld %.6f %.6f %ld %.6f\n", insts[i].done ? insts[i].finished : -1.0,
               insts[i].begun - start, insts[i].failed_attempts, insts[i].failed_steps, insts[i].wrong, insts[i].first,
               insts[i].connect_max, insts[i].slow_connects, insts[i].latency_max);
    qsort(latencies, nlat, sizeof(double), compare);
    printf("failures %ld connections %ld requests %zu p50_ms %.3f p99_ms %.3f wrong %ld\n", failures, connections,
           nlat, nlat ? latencies[nlat / 2] * 1e3 : 0.0, nlat ? latencies[(size_t)(nlat * 0.99)] * 1e3 : 0.0, wrong);
    return 0;
}
