/*
 * cmsafe.hpp: header-only C++ wrappers over cmsafe.h.
 *
 *   cmsafe::event    an event copy: copying retains, destruction releases, moving empties the source
 *   cmsafe::buffer   a private data buffer, refcounted the same way
 *   cmsafe::channel  fetches from a `struct rdma_event_channel *` (not owned): get, get_batch
 *   cmsafe::flight   the flight recorder: set_size, dump
 *
 * C++11; the std::optional form of channel::get needs C++17. Errors are std::system_error
 * carrying the errno of the C call (std::generic_category()). Every handle may be empty (default
 * constructed, moved from, reset): its accessors then return the C API's neutral values (0, -1,
 * NULL, an empty view), as the C functions do for NULL.
 *
 * Written by hand over the C API (include/cmsafe.h); link with `pkg-config --cflags --libs cmsafe`.
 */

#ifndef CMSAFE_HPP
#define CMSAFE_HPP

#include "cmsafe.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#if __cplusplus >= 201703L
#include <optional>
#endif

namespace cmsafe {

/** Throws std::system_error for `err` (an errno value), naming the C call that failed. */
[[noreturn]] inline void throw_errno(int err, const char *what)
{
    throw std::system_error(err, std::generic_category(), what);
}

/**
 * A borrowed, span-like view of immutable bytes. It owns nothing: it is valid while a reference
 * to the buffer (or the event) it came from is held.
 */
class byte_view {
public:
    using value_type = std::uint8_t;
    using size_type = std::size_t;
    using const_iterator = const std::uint8_t *;
    using iterator = const_iterator;

    constexpr byte_view() noexcept : data_(nullptr), size_(0) {}
    constexpr byte_view(const std::uint8_t *data, std::size_t size) noexcept
        : data_(data), size_(data ? size : 0)
    {
    }

    constexpr const std::uint8_t *data() const noexcept { return data_; }
    constexpr std::size_t size() const noexcept { return size_; }
    constexpr bool empty() const noexcept { return size_ == 0; }
    constexpr const std::uint8_t *begin() const noexcept { return data_; }
    constexpr const std::uint8_t *end() const noexcept { return data_ + size_; }
    /** The byte at `i`, unchecked: `i` < size(). */
    constexpr const std::uint8_t &operator[](std::size_t i) const noexcept { return data_[i]; }

private:
    const std::uint8_t *data_;
    std::size_t size_;
};

/**
 * One reference to a private data buffer (cmsafe_buf). Copying takes another reference
 * (cmsafe_buf_retain), destruction gives it back (cmsafe_buf_release), moving leaves the source
 * empty. A buffer outlives its event and may move to another thread.
 */
class buffer {
public:
    buffer() noexcept : buf_(nullptr) {}

    /** Takes over a reference the caller holds (from cmsafe_buf_retain). */
    static buffer adopt(const cmsafe_buf *buf) noexcept { return buffer(buf); }
    /** Takes a new reference to `buf` (NULL gives an empty buffer). */
    static buffer retain(const cmsafe_buf *buf) noexcept { return buffer(cmsafe_buf_retain(buf)); }

    buffer(const buffer &other) noexcept : buf_(cmsafe_buf_retain(other.buf_)) {}
    buffer(buffer &&other) noexcept : buf_(other.buf_) { other.buf_ = nullptr; }
    buffer &operator=(const buffer &other) noexcept
    {
        buffer copy(other);
        swap(copy);
        return *this;
    }
    buffer &operator=(buffer &&other) noexcept
    {
        buffer moved(std::move(other));
        swap(moved);
        return *this;
    }
    ~buffer() { cmsafe_buf_release(buf_); }

    void swap(buffer &other) noexcept { std::swap(buf_, other.buf_); }
    /** Gives the reference back now; the handle becomes empty. */
    void reset() noexcept
    {
        const cmsafe_buf *old = buf_;
        buf_ = nullptr;
        cmsafe_buf_release(old);
    }
    /** Hands the reference over to the caller (who releases it); the handle becomes empty. */
    const cmsafe_buf *release() noexcept
    {
        const cmsafe_buf *old = buf_;
        buf_ = nullptr;
        return old;
    }
    /** The C handle, borrowed. */
    const cmsafe_buf *get() const noexcept { return buf_; }
    explicit operator bool() const noexcept { return buf_ != nullptr; }

    /** The bytes (cmsafe_buf_data): NULL when empty. */
    const std::uint8_t *data() const noexcept { return cmsafe_buf_data(buf_); }
    /** The length the transport reported (cmsafe_buf_len), 0 to 255; 0 when empty. */
    std::size_t size() const noexcept { return cmsafe_buf_len(buf_); }
    bool empty() const noexcept { return size() == 0; }
    byte_view view() const noexcept { return byte_view(data(), size()); }
    const std::uint8_t *begin() const noexcept { return data(); }
    const std::uint8_t *end() const noexcept { return data() + size(); }

private:
    explicit buffer(const cmsafe_buf *buf) noexcept : buf_(buf) {}
    const cmsafe_buf *buf_;
};

inline void swap(buffer &a, buffer &b) noexcept { a.swap(b); }

/**
 * One reference to an event copy (cmsafe_event), already acked in librdmacm. Copying takes
 * another reference (cmsafe_event_retain), destruction gives it back (cmsafe_event_release),
 * moving leaves the source empty. The copy is immutable: any thread may read it.
 */
class event {
public:
    event() noexcept : ev_(nullptr) {}

    /** Takes over a reference the caller holds (from cmsafe_get_event*, cmsafe_event_retain). */
    static event adopt(cmsafe_event *ev) noexcept { return event(ev); }
    /** Takes a new reference to `ev` (NULL gives an empty event). */
    static event retain(const cmsafe_event *ev) noexcept { return event(cmsafe_event_retain(ev)); }

    event(const event &other) noexcept : ev_(cmsafe_event_retain(other.ev_)) {}
    event(event &&other) noexcept : ev_(other.ev_) { other.ev_ = nullptr; }
    event &operator=(const event &other) noexcept
    {
        event copy(other);
        swap(copy);
        return *this;
    }
    event &operator=(event &&other) noexcept
    {
        event moved(std::move(other));
        swap(moved);
        return *this;
    }
    ~event() { cmsafe_event_release(ev_); }

    void swap(event &other) noexcept { std::swap(ev_, other.ev_); }
    /** Gives the reference back now; the handle becomes empty. */
    void reset() noexcept
    {
        cmsafe_event *old = ev_;
        ev_ = nullptr;
        cmsafe_event_release(old);
    }
    /** Hands the reference over to the caller (who releases it); the handle becomes empty. */
    cmsafe_event *release() noexcept
    {
        cmsafe_event *old = ev_;
        ev_ = nullptr;
        return old;
    }
    /** The C handle, borrowed. */
    cmsafe_event *get() const noexcept { return ev_; }
    explicit operator bool() const noexcept { return ev_ != nullptr; }

    /** An `enum rdma_cm_event_type` value (cmsafe_event_type); -1 when empty. */
    int type() const noexcept { return cmsafe_event_type(ev_); }
    /** 0, a negative errno or an IB CM reject reason (cmsafe_event_status); 0 when empty. */
    int status() const noexcept { return cmsafe_event_status(ev_); }
    /** How to read status() (cmsafe_event_status_kind); CMSAFE_STATUS_KIND_OTHER when empty. */
    cmsafe_status_kind status_kind() const noexcept { return cmsafe_event_status_kind(ev_); }
    /** The event's cm_id, owned by the application (cmsafe_event_id). */
    struct rdma_cm_id *id() const noexcept { return cmsafe_event_id(ev_); }
    /** The listen id of a CONNECT_REQUEST, else NULL (cmsafe_event_listen_id). */
    struct rdma_cm_id *listen_id() const noexcept { return cmsafe_event_listen_id(ev_); }
    /** Process-wide fetch order, from 1 (cmsafe_event_seq); 0 when empty. */
    std::uint64_t seq() const noexcept { return cmsafe_event_seq(ev_); }
    /** The fetch time, CLOCK_MONOTONIC_COARSE nanoseconds (cmsafe_event_time_ns); 0 when empty. */
    std::uint64_t time_ns() const noexcept { return cmsafe_event_time_ns(ev_); }
    /** The fetch time as a duration since CLOCK_MONOTONIC's epoch (a coarse reading). */
    std::chrono::nanoseconds time() const noexcept
    {
        return std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(time_ns()));
    }
    /** librdmacm's view of the copy (cmsafe_event_cm), borrowed; NULL when empty. */
    const struct rdma_cm_event *cm() const noexcept { return cmsafe_event_cm(ev_); }
    /** The id's local and peer addresses at fetch time, borrowed; NULL when empty. */
    const struct sockaddr *src_addr() const noexcept { return cmsafe_event_src_addr(ev_); }
    const struct sockaddr *dst_addr() const noexcept { return cmsafe_event_dst_addr(ev_); }

    /** A new reference to the private data buffer, which may outlive the event; empty when the
     *  event carries none. */
    buffer private_data() const noexcept { return buffer::retain(cmsafe_event_private_data(ev_)); }
    /** The private data bytes, borrowed from the event (no refcount taken). */
    byte_view private_data_view() const noexcept
    {
        const cmsafe_buf *buf = cmsafe_event_private_data(ev_);
        return byte_view(cmsafe_buf_data(buf), cmsafe_buf_len(buf));
    }

    /** One log line (cmsafe_event_describe), never the private data bytes.
     *  Throws std::system_error (EINVAL) when empty. */
    std::string describe() const
    {
        int len = cmsafe_event_describe(ev_, nullptr, 0);
        if (len < 0)
            throw_errno(errno, "cmsafe_event_describe");
        std::vector<char> line(static_cast<std::size_t>(len) + 1);
        len = cmsafe_event_describe(ev_, line.data(), line.size());
        if (len < 0)
            throw_errno(errno, "cmsafe_event_describe");
        return std::string(line.data(), std::min(static_cast<std::size_t>(len), line.size() - 1));
    }

private:
    explicit event(cmsafe_event *ev) noexcept : ev_(ev) {}
    cmsafe_event *ev_;
};

inline void swap(event &a, event &b) noexcept { a.swap(b); }

/**
 * Fetches events from a librdmacm event channel. It does not own the channel: create and
 * destroy it with rdma_create_event_channel(3) and rdma_destroy_event_channel(3). Copies are
 * cheap; any number of threads may fetch from one channel.
 *
 * `timeout_ms` < 0 waits without limit, 0 takes only what is queued. "Nothing arrived" (timeout,
 * or EAGAIN on an O_NONBLOCK channel) is not an error; every other failure (EINTR, ENOMEM,
 * EINVAL, ...) throws std::system_error with the errno of the C call.
 */
class channel {
public:
    explicit channel(struct rdma_event_channel *ch) noexcept : ch_(ch) {}

    struct rdma_event_channel *native_handle() const noexcept { return ch_; }
    /** The channel's file descriptor, for poll(2) and friends; -1 without a channel. */
    int fd() const noexcept { return ch_ ? ch_->fd : -1; }

    /**
     * Waits up to `timeout_ms` for the next event (cmsafe_get_event_timeout). Returns true and
     * stores it in `out` (releasing what `out` held), or false when nothing arrived (`out`
     * untouched).
     */
    bool get(event &out, int timeout_ms = -1) const
    {
        cmsafe_event *ev = nullptr;
        if (cmsafe_get_event_timeout(ch_, &ev, timeout_ms) != 0) {
            int err = errno;
            if (err == ETIMEDOUT || err == EAGAIN)
                return false;
            throw_errno(err, "cmsafe_get_event_timeout");
        }
        out = event::adopt(ev);
        return true;
    }

#if __cplusplus >= 201703L
    /** As get(event &, int): the event, or std::nullopt when nothing arrived. */
    std::optional<event> get(int timeout_ms = -1) const
    {
        event ev;
        if (!get(ev, timeout_ms))
            return std::nullopt;
        return std::optional<event>(std::move(ev));
    }
#endif

    /**
     * Waits up to `timeout_ms` for a first event, then takes what is already queued, up to `max`
     * (cmsafe_get_events). Returns the events in fetch order; empty when nothing arrived.
     * `max` == 0 throws std::system_error (EINVAL).
     */
    std::vector<event> get_batch(std::size_t max, int timeout_ms = -1) const
    {
        std::vector<cmsafe_event *> raw(max);
        std::vector<event> out;
        out.reserve(max); /* every allocation before the fetch: nothing can throw after it */
        int n = cmsafe_get_events(ch_, max ? raw.data() : nullptr, max, timeout_ms);
        if (n < 0) {
            int err = errno;
            if (err == ETIMEDOUT || err == EAGAIN)
                return out;
            throw_errno(err, "cmsafe_get_events");
        }
        for (int i = 0; i < n; i++)
            out.push_back(event::adopt(raw[static_cast<std::size_t>(i)]));
        return out;
    }

private:
    struct rdma_event_channel *ch_;
};

/** The process-wide counters (cmsafe_stats_get). */
inline cmsafe_stats stats()
{
    cmsafe_stats s = cmsafe_stats();
    if (cmsafe_stats_get(&s) != 0)
        throw_errno(errno, "cmsafe_stats_get");
    return s;
}

/**
 * The flight recorder: the process's last events, kept by the library (cmsafe_flight_set_size(3),
 * cmsafe_flight_dump(3) say what each record holds and when it is written).
 */
namespace flight {

/** Keeps the last `n` events, in a new empty ring (cmsafe_flight_set_size); 0 turns the
 *  recorder off. Throws std::system_error: EINVAL above CMSAFE_FLIGHT_MAX_EVENTS, ENOMEM. */
inline void set_size(std::size_t n)
{
    if (cmsafe_flight_set_size(n) != 0)
        throw_errno(errno, "cmsafe_flight_set_size");
}

/** Writes the records to `fd` as JSON lines (cmsafe_flight_dump) and returns how many; `fd`
 *  stays the caller's. Allocates nothing, but may throw: a program's crash handler should call
 *  cmsafe_flight_dump itself. Throws std::system_error: EBADF, or the write(2)'s errno. */
inline std::size_t dump(int fd)
{
    int n = cmsafe_flight_dump(fd);
    if (n < 0)
        throw_errno(errno, "cmsafe_flight_dump");
    return static_cast<std::size_t>(n);
}

} // namespace flight

/** The version of the library loaded at run time (cmsafe_version); CMSAFE_VERSION_STRING is
 *  the header's. */
inline const char *version() noexcept { return cmsafe_version(); }

} // namespace cmsafe

#endif /* CMSAFE_HPP */
