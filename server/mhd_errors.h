/* mhd_errors.h -- libmicrohttpd's own error answers, as problem+json.
 *
 * libmicrohttpd 0.9.75 answers some requests before any of the gateway's
 * callbacks runs: a request line that does not fit the connection's buffer
 * (414), headers that do not (431), a request it cannot parse (400), each
 * with a fixed HTML body.  The first two are the client's to fix and
 * common (a long URL, a big cookie), so they get the gateway's answer.  It builds them with its public
 * MHD_create_response_from_buffer and MHD_queue_response, called through
 * its PLT (Debian's build), so this file defines both in the executable
 * (ELF symbol interposition): a response libmicrohttpd makes from one of
 * its own HTML messages is swapped, when it is queued and its status is
 * known, for a problem+json one with the same status and a stable code
 * (reply.h's table).  Every other call goes straight to the library.  The
 * cost is one pointer comparison per response.  test_http checks the
 * answers, plain and TLS; a libmicrohttpd that stopped calling through its
 * PLT would fail there, not silently. */
#ifndef LOCKGATE_MHD_ERRORS_H
#define LOCKGATE_MHD_ERRORS_H

/* The connection buffer's size in bytes, for the answers' detail
 * (--connection-memory-kib); set once at start. */
void mhd_errors_init(unsigned buffer_bytes);

#endif
