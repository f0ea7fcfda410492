// cmsafe.hpp on the real stack: a server and a client in one process, every event fetched
// through cmsafe::channel (connection setup with raw librdmacm calls). Checks the private data
// bytes and lengths (56 on CONNECT_REQUEST, 196 on ESTABLISHED on RoCE; as sent on iWARP:
// c-tests/transport.h, the listen id's device decides), copy and move semantics
// of cmsafe::event and cmsafe::buffer against cmsafe's live counters, the C++11 and C++17 forms
// of channel::get, get_batch, errors as std::system_error, and that every reference is given back.
// Built with -std=c++17 under ASan and UBSan; run by c-tests/run-in-guest.
#include <cmsafe.hpp>

#include "transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

int passed, failed;

[[noreturn]] void finish()
{
    std::printf("cpp_events: %d passed, %d failed\n", passed, failed);
    std::fflush(stdout);
    std::exit(failed ? 1 : 0);
}

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (cond) {                                                                        \
            passed++;                                                                      \
        } else {                                                                           \
            failed++;                                                                      \
            std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            std::fprintf(stderr, __VA_ARGS__);                                             \
            std::fputc('\n', stderr);                                                      \
        }                                                                                  \
    } while (0)

#define REQUIRE(cond, ...)                                                                 \
    do {                                                                                   \
        int before_ = failed;                                                              \
        CHECK(cond, __VA_ARGS__);                                                          \
        if (failed != before_)                                                             \
            finish();                                                                      \
    } while (0)

#define STEP(what) std::fprintf(stderr, "step: %s\n", what)

// F throws std::system_error with errno ERR.
template <typename F> void expect_errno(int err, F f, const char *what)
{
    int got = 0;
    try {
        f();
    } catch (const std::system_error &e) {
        got = e.code().category() == std::generic_category() ? e.code().value() : -1;
    }
    CHECK(got == err, "%s threw errno %d, want %d", what, got, err);
}

// The types behave as documented.
static_assert(std::is_nothrow_move_constructible<cmsafe::event>::value, "event moves");
static_assert(std::is_nothrow_move_assignable<cmsafe::event>::value, "event move-assigns");
static_assert(std::is_copy_constructible<cmsafe::event>::value, "event copies (retain)");
static_assert(std::is_nothrow_destructible<cmsafe::event>::value, "event releases");
static_assert(std::is_nothrow_move_constructible<cmsafe::buffer>::value, "buffer moves");
static_assert(std::is_copy_constructible<cmsafe::buffer>::value, "buffer copies (retain)");

constexpr unsigned short PORT = 7495;
constexpr int WAIT_MS = 5000;

sockaddr_in rxe_addr(unsigned short port)
{
    const char *a = std::getenv("RXE_ADDR");
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    REQUIRE(a && inet_pton(AF_INET, a, &sin.sin_addr) == 1,
            "RXE_ADDR must hold the guest's RDMA address (run under scripts/rxe-vm)");
    return sin;
}

std::uint64_t live_events() { return cmsafe::stats().live_events; }
std::uint64_t live_buffers() { return cmsafe::stats().live_buffers; }

// The next event on `ch`, which must be `want` (the C++17 form of get).
cmsafe::event expect(const cmsafe::channel &ch, rdma_cm_event_type want, const char *what)
{
    std::optional<cmsafe::event> ev = ch.get(WAIT_MS);
    REQUIRE(ev.has_value(), "%s: no event within %d ms", what, WAIT_MS);
    REQUIRE(ev->type() == want, "%s: got %s (status %d), want %s", what,
            rdma_event_str(ev->cm()->event), ev->status(), rdma_event_str(want));
    return std::move(*ev);
}

void create_qp(rdma_cm_id *id)
{
    ibv_qp_init_attr attr{};
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    attr.qp_type = IBV_QPT_RC;
    REQUIRE(rdma_create_qp(id, nullptr, &attr) == 0, "rdma_create_qp: %s", std::strerror(errno));
}

rdma_conn_param conn_param(const unsigned char *pdata, unsigned char len)
{
    rdma_conn_param p{};
    p.private_data = pdata;
    p.private_data_len = len;
    p.responder_resources = p.initiator_depth = 1;
    p.retry_count = p.rnr_retry_count = 7;
    return p;
}

void fill(unsigned char *buf, unsigned len, unsigned char seed)
{
    for (unsigned i = 0; i < len; i++)
        buf[i] = static_cast<unsigned char>(seed + i * 7);
}

// The first `sent_len` bytes of `got` are `sent`, the rest (transport padding) zero.
void check_bytes(cmsafe::byte_view got, const unsigned char *sent, std::size_t sent_len,
                 std::size_t want_len, const char *what)
{
    CHECK(got.size() == want_len, "%s: %zu bytes, want %zu", what, got.size(), want_len);
    REQUIRE(got.size() >= sent_len && got.data() != nullptr, "%s: too short", what);
    CHECK(std::memcmp(got.data(), sent, sent_len) == 0, "%s: the peer's bytes differ", what);
    CHECK(std::all_of(got.begin() + sent_len, got.end(), [](std::uint8_t b) { return b == 0; }),
          "%s: padding is not zero", what);
}

void on_watchdog(int)
{
    static const char msg[] = "FAIL watchdog: cpp_events did not finish in time (a hang)\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
        // nothing more to do
    }
    _exit(3);
}

} // namespace

int main()
{
    std::signal(SIGALRM, on_watchdog);
    alarm(90);

    CHECK(std::strcmp(cmsafe::version(), CMSAFE_VERSION_STRING) == 0,
          "cmsafe::version() %s, header %s", cmsafe::version(), CMSAFE_VERSION_STRING);

    STEP("empty handles and errors");
    {
        cmsafe::event none;
        CHECK(!none && none.get() == nullptr, "a default event is empty");
        CHECK(none.type() == -1 && none.seq() == 0 && none.cm() == nullptr && !none.id(),
              "an empty event gives the neutral values");
        CHECK(!none.private_data() && none.private_data_view().empty(), "no private data");
        bool threw = false;
        try {
            (void)none.describe();
        } catch (const std::system_error &e) {
            threw = e.code() == std::errc::invalid_argument;
        }
        CHECK(threw, "describe() of an empty event throws EINVAL");

        cmsafe::channel nowhere(nullptr);
        CHECK(nowhere.fd() == -1, "no channel, no fd");
        threw = false;
        try {
            (void)nowhere.get(0);
        } catch (const std::system_error &e) {
            threw = e.code() == std::errc::invalid_argument;
        }
        CHECK(threw, "get() on a NULL channel throws EINVAL");
        threw = false;
        try {
            cmsafe::event ev;
            (void)nowhere.get(ev, 0);
        } catch (const std::system_error &e) {
            threw = e.code().value() == EINVAL && e.code().category() == std::generic_category();
        }
        CHECK(threw, "get(event &) on a NULL channel throws EINVAL in the generic category");
    }

    rdma_event_channel *sch = rdma_create_event_channel();
    rdma_event_channel *cch = rdma_create_event_channel();
    REQUIRE(sch && cch, "rdma_create_event_channel: %s", std::strerror(errno));
    const cmsafe::channel server(sch), client(cch);
    CHECK(server.native_handle() == sch && server.fd() == sch->fd, "the channel wraps sch");

    STEP("nothing queued");
    {
        CHECK(!server.get(0).has_value(), "get(0) on an idle channel gives nullopt");
        cmsafe::event keep;
        CHECK(!server.get(keep, 0) && !keep, "get(ev, 0) on an idle channel: false, ev untouched");
        CHECK(server.get_batch(4, 0).empty(), "get_batch(4, 0) on an idle channel: empty");
        bool threw = false;
        try {
            (void)server.get_batch(0, 0);
        } catch (const std::system_error &e) {
            threw = e.code() == std::errc::invalid_argument;
        }
        CHECK(threw, "get_batch(0, ...) throws EINVAL");
    }

    const std::uint64_t events_at_start = live_events();
    const std::uint64_t buffers_at_start = live_buffers();

    STEP("listen, resolve");
    rdma_cm_id *listen_id = nullptr, *cid = nullptr;
    sockaddr_in sin = rxe_addr(PORT);
    REQUIRE(rdma_create_id(sch, &listen_id, nullptr, RDMA_PS_TCP) == 0, "rdma_create_id: %s",
            std::strerror(errno));
    REQUIRE(rdma_bind_addr(listen_id, reinterpret_cast<sockaddr *>(&sin)) == 0,
            "rdma_bind_addr: %s", std::strerror(errno));
    REQUIRE(rdma_listen(listen_id, 16) == 0, "rdma_listen: %s", std::strerror(errno));
    // Bound to the device's address: its transport is the connection's.
    const cm_transport tr = cm_device_transport(listen_id->verbs);
    std::fprintf(stderr, "step: transport %s\n", cm_transport_name(tr));
    REQUIRE(rdma_create_id(cch, &cid, nullptr, RDMA_PS_TCP) == 0, "rdma_create_id: %s",
            std::strerror(errno));
    REQUIRE(rdma_resolve_addr(cid, nullptr, reinterpret_cast<sockaddr *>(&sin), 2000) == 0,
            "rdma_resolve_addr: %s", std::strerror(errno));
    std::uint64_t last_seq = 0, last_time = 0;
    {
        // The C++11 form: bool and an out parameter.
        cmsafe::event ev;
        REQUIRE(client.get(ev, WAIT_MS), "no ADDR_RESOLVED within %d ms", WAIT_MS);
        REQUIRE(ev.type() == RDMA_CM_EVENT_ADDR_RESOLVED, "got %s", rdma_event_str(ev.cm()->event));
        CHECK(ev.id() == cid && ev.listen_id() == nullptr, "ADDR_RESOLVED is for the client id");
        CHECK(ev.status() == 0 && ev.status_kind() == CMSAFE_STATUS_KIND_OK, "status %d",
              ev.status());
        CHECK(ev.seq() > 0 && ev.time_ns() > 0, "seq %llu, time %llu",
              static_cast<unsigned long long>(ev.seq()),
              static_cast<unsigned long long>(ev.time_ns()));
        CHECK(ev.time() == std::chrono::nanoseconds(ev.time_ns()), "time() is time_ns()");
        last_seq = ev.seq();
        last_time = ev.time_ns();
    }
    REQUIRE(rdma_resolve_route(cid, 2000) == 0, "rdma_resolve_route: %s", std::strerror(errno));
    {
        cmsafe::event ev = expect(client, RDMA_CM_EVENT_ROUTE_RESOLVED, "route");
        CHECK(ev.seq() > last_seq && ev.time_ns() >= last_time, "seq and time increase");
        last_seq = ev.seq();
        last_time = ev.time_ns();
    }
    create_qp(cid);

    STEP("connect with 40 bytes");
    unsigned char req[40], rep[100];
    fill(req, sizeof req, 1);
    fill(rep, sizeof rep, 101);
    const std::size_t req_len = cm_req_len(tr, sizeof req), rep_len = cm_rep_len(tr, sizeof rep);
    rdma_conn_param cp = conn_param(req, sizeof req);
    REQUIRE(rdma_connect(cid, &cp) == 0, "rdma_connect: %s", std::strerror(errno));

    cmsafe::event creq;
    {
        std::vector<cmsafe::event> batch = server.get_batch(8, WAIT_MS);
        REQUIRE(!batch.empty(), "no CONNECT_REQUEST within %d ms", WAIT_MS);
        REQUIRE(batch[0].type() == RDMA_CM_EVENT_CONNECT_REQUEST, "got %s",
                rdma_event_str(batch[0].cm()->event));
        CHECK(batch.size() == 1, "one event queued, %zu in the batch", batch.size());
        creq = std::move(batch[0]);
        CHECK(!batch[0], "a moved-from event is empty");
    }
    CHECK(creq.listen_id() == listen_id, "CONNECT_REQUEST arrived on the listen id");
    CHECK(creq.id() && creq.id() != listen_id, "CONNECT_REQUEST carries the new id");
    CHECK(creq.seq() > last_seq && creq.time_ns() >= last_time, "seq and time increase");
    CHECK(creq.src_addr() && creq.src_addr()->sa_family == AF_INET, "the id's address was copied");
    check_bytes(creq.private_data_view(), req, sizeof req, req_len, "CONNECT_REQUEST");
    CHECK(creq.cm()->param.conn.private_data_len == req_len, "cm() private_data_len %u",
          creq.cm()->param.conn.private_data_len);
    CHECK(creq.cm()->param.conn.private_data == creq.private_data_view().data(),
          "cm() private_data points into cmsafe's buffer");
    {
        std::string line = creq.describe();
        CHECK(!line.empty() &&
                  line.size() == static_cast<std::size_t>(cmsafe_event_describe(creq.get(), nullptr, 0)),
              "describe(): \"%s\"", line.c_str());
    }
    rdma_cm_id *child = creq.id();

    STEP("copy and move an event");
    const std::uint64_t base = live_events();
    CHECK(base == events_at_start + 1, "one live event (the request), %llu",
          static_cast<unsigned long long>(base - events_at_start));
    cmsafe::buffer pd;
    {
        cmsafe::event a = creq; // copy: one more reference to the same copy
        CHECK(a.get() == creq.get() && live_events() == base, "a copy shares the event");
        creq.reset(); // the original's reference given back: `a` keeps it alive
        CHECK(!creq && live_events() == base, "after the original's release, the copy holds it");
        check_bytes(a.private_data_view(), req, sizeof req, req_len,
                    "CONNECT_REQUEST through a copy");

        cmsafe::event b = std::move(a); // move: no refcount change, the source empty
        CHECK(!a && a.get() == nullptr && b && live_events() == base, "a move empties the source");
        cmsafe::event c;
        c = b; // copy assignment
        cmsafe::event &alias = c;
        c = alias; // self-assignment keeps it
        CHECK(c.get() == b.get() && live_events() == base, "copy assignment shares the event");
        b = cmsafe::event(); // move assignment of an empty event releases b's reference
        CHECK(!b && c && live_events() == base, "c still holds the event");

        // release() and adopt(): out to C and back.
        cmsafe_event *raw = c.release();
        CHECK(!c && raw, "release() hands the reference over");
        cmsafe::event back = cmsafe::event::adopt(raw);
        cmsafe::event extra = cmsafe::event::retain(raw);
        CHECK(back.get() == raw && extra.get() == raw, "adopt and retain");
        extra.reset();

        // Copies in a container, released with it.
        std::vector<cmsafe::event> copies(5, back);
        CHECK(live_events() == base, "five more references, still one event");
        copies.clear();

        // The private data buffer outlives the event.
        pd = back.private_data();
        CHECK(pd && pd.size() == req_len, "private_data(): %zu bytes", pd.size());
        CHECK(live_buffers() == buffers_at_start + 1, "one live buffer");
        back.reset(); // the last reference: the event is freed
        CHECK(live_events() == base - 1, "the event is freed with its last reference");
    }
    CHECK(live_buffers() == buffers_at_start + 1, "the buffer lives on without its event");
    check_bytes(pd.view(), req, sizeof req, req_len, "the buffer after its event was freed");
    {
        cmsafe::buffer pd2 = pd; // copy: retain
        CHECK(pd2.get() == pd.get(), "a buffer copy shares the buffer");
        pd.reset();
        CHECK(!pd && live_buffers() == buffers_at_start + 1, "the copy keeps the buffer");
        cmsafe::buffer pd3 = std::move(pd2);
        CHECK(!pd2 && pd3.size() == req_len, "a buffer move empties the source");
        // Read from another thread, then released there.
        bool same = false;
        std::thread reader([&same, b = std::move(pd3), &req, req_len]() mutable {
            same = b.size() == req_len && std::equal(req, req + sizeof req, b.begin());
            b.reset();
        });
        reader.join();
        CHECK(same, "the bytes read from another thread");
    }
    CHECK(live_buffers() == buffers_at_start, "every buffer reference given back");

    STEP("accept with 100 bytes");
    create_qp(child);
    rdma_conn_param ap = conn_param(rep, sizeof rep);
    REQUIRE(rdma_accept(child, &ap) == 0, "rdma_accept: %s", std::strerror(errno));
    {
        cmsafe::event est = expect(client, RDMA_CM_EVENT_ESTABLISHED, "client ESTABLISHED");
        CHECK(est.id() == cid, "ESTABLISHED is for the client id");
        cmsafe::buffer echo = est.private_data();
        check_bytes(echo.view(), rep, sizeof rep, rep_len, "ESTABLISHED (client)");
        CHECK(est.cm()->param.conn.private_data_len == rep_len, "cm() private_data_len %u",
              est.cm()->param.conn.private_data_len);
        std::size_t sum = 0;
        for (std::uint8_t byte : echo)
            sum += byte;
        std::size_t want = 0;
        for (unsigned char byte : rep)
            want += byte;
        CHECK(sum == want, "iterating the buffer sees the accept bytes");
        // Moved to another thread and released there.
        std::thread t([e = std::move(est)]() mutable { e.reset(); });
        t.join();
    }
    {
        cmsafe::event sest;
        REQUIRE(server.get(sest, WAIT_MS), "no server ESTABLISHED");
        CHECK(sest.type() == RDMA_CM_EVENT_ESTABLISHED && sest.id() == child,
              "server ESTABLISHED for the child id, got %s", rdma_event_str(sest.cm()->event));
    }

    STEP("batches: three ids resolved, taken two at a time");
    {
        rdma_cm_id *ids[3] = {};
        for (rdma_cm_id *&id : ids) {
            REQUIRE(rdma_create_id(cch, &id, nullptr, RDMA_PS_TCP) == 0, "rdma_create_id: %s",
                    std::strerror(errno));
            REQUIRE(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr *>(&sin), 2000) == 0,
                    "rdma_resolve_addr: %s", std::strerror(errno));
        }
        usleep(300 * 1000); // let the three events queue up
        std::vector<cmsafe::event> all;
        std::size_t batches = 0, largest = 0;
        while (all.size() < 3) {
            std::vector<cmsafe::event> batch = client.get_batch(2, WAIT_MS);
            REQUIRE(!batch.empty(), "only %zu of 3 ADDR_RESOLVED", all.size());
            batches++;
            largest = std::max(largest, batch.size());
            for (cmsafe::event &ev : batch)
                all.push_back(std::move(ev));
        }
        CHECK(largest == 2 && batches == 2, "%zu batches, the largest %zu", batches, largest);
        for (std::size_t i = 0; i < all.size(); i++) {
            CHECK(all[i].type() == RDMA_CM_EVENT_ADDR_RESOLVED, "event %zu: %s", i,
                  rdma_event_str(all[i].cm()->event));
            CHECK(i == 0 || all[i].seq() > all[i - 1].seq(), "batches keep fetch order");
        }
        CHECK(live_events() == events_at_start + 3, "three live events");
        all.clear();
        for (rdma_cm_id *id : ids)
            CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id: %s", std::strerror(errno));
    }

    STEP("disconnect");
    // The client's DREQ reaches the server first; the server's own disconnect answers it.
    REQUIRE(rdma_disconnect(cid) == 0, "rdma_disconnect: %s", std::strerror(errno));
    cmsafe::event sdisc = expect(server, RDMA_CM_EVENT_DISCONNECTED, "server DISCONNECTED");
    CHECK(sdisc.id() == child, "server DISCONNECTED for the child id");
    REQUIRE(rdma_disconnect(child) == 0, "rdma_disconnect(child): %s", std::strerror(errno));
    cmsafe::event cdisc = expect(client, RDMA_CM_EVENT_DISCONNECTED, "client DISCONNECTED");
    CHECK(cdisc.id() == cid, "client DISCONNECTED for the client id");
    sdisc.reset();
    cdisc.reset();

    STEP("destroy");
    rdma_destroy_qp(child);
    rdma_destroy_qp(cid);
    CHECK(rdma_destroy_id(child) == 0, "rdma_destroy_id(child)");
    CHECK(rdma_destroy_id(cid) == 0, "rdma_destroy_id(client)");
    CHECK(rdma_destroy_id(listen_id) == 0, "rdma_destroy_id(listen)");
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);

    cmsafe_stats st = cmsafe::stats();
    CHECK(st.live_events == 0 && st.live_buffers == 0 && st.pending == 0,
          "live events %llu, buffers %llu, pending %llu",
          static_cast<unsigned long long>(st.live_events),
          static_cast<unsigned long long>(st.live_buffers),
          static_cast<unsigned long long>(st.pending));
    CHECK(st.acked == st.fetched && st.fetched > 0, "acked %llu of %llu fetched",
          static_cast<unsigned long long>(st.acked), static_cast<unsigned long long>(st.fetched));

    STEP("flight recorder");
    // Every copy is released, each wrote its record: the dump holds them all (the default ring
    // keeps 4096), oldest first, each a whole JSON line.
    std::FILE *f = std::tmpfile();
    REQUIRE(f != nullptr, "tmpfile: %s", std::strerror(errno));
    std::size_t dumped = cmsafe::flight::dump(fileno(f));
    CHECK(dumped == st.fetched, "flight::dump wrote %zu records, %llu events fetched", dumped,
          static_cast<unsigned long long>(st.fetched));
    std::rewind(f);
    char line[1024];
    std::size_t lines = 0, disconnected = 0;
    while (std::fgets(line, sizeof line, f) != nullptr) {
        lines++;
        CHECK(std::strncmp(line, "{\"record\":\"flight\",\"seq\":", 25) == 0 &&
                  line[std::strlen(line) - 1] == '\n',
              "dump line %zu: %s", lines, line);
        if (std::strstr(line, "\"type\":\"DISCONNECTED\"") != nullptr)
            disconnected++;
    }
    std::fclose(f);
    CHECK(lines == dumped, "%zu lines for %zu records", lines, dumped);
    CHECK(disconnected == 2, "%zu DISCONNECTED records, want the server's and the client's",
          disconnected);
    expect_errno(EBADF, [] { cmsafe::flight::dump(-1); }, "flight::dump(-1)");
    expect_errno(EINVAL, [] { cmsafe::flight::set_size(CMSAFE_FLIGHT_MAX_EVENTS + 1); },
                 "flight::set_size(CMSAFE_FLIGHT_MAX_EVENTS + 1)");
    cmsafe::flight::set_size(16);
    int devnull = open("/dev/null", O_WRONLY);
    REQUIRE(devnull >= 0, "open /dev/null: %s", std::strerror(errno));
    CHECK(cmsafe::flight::dump(devnull) == 0, "a new ring starts empty");
    close(devnull);
    finish();
}
