#pragma once

// The job secret (docs/rendezvous.md, "Only the job's members"): a store that serves a job's
// launchers can demand that a connection prove it knows the job's secret before it writes a
// launchers' key ("/acc/...", and the elastic rendezvous' "/rdzv/..."): joining, ending or
// restarting the job. The proof goes over the store's
// own protocol, so PyTorch's clients (which write no launcher key) connect as before:
//   CHECK  [kJobNonceKey]   READY: this store demands the secret
//   GET    kJobNonceKey     a nonce of this connection's own (the server's random salt, hashed
//                           with the connection's id: a proof seen on the wire opens no other)
//   SET    kJobProofKey     job_proof(secret, nonce); a wrong one closes the connection
//   CHECK  [kJobMemberKey]  READY once the proof was right
// The secret itself never crosses the wire.

#include <string>
#include <string_view>

namespace acc::rendezvous {

// The keys as a client names them (the wire adds "/" before each).
inline constexpr std::string_view kJobNonceKey = "acc/job/nonce";
inline constexpr std::string_view kJobProofKey = "acc/job/proof";
inline constexpr std::string_view kJobMemberKey = "acc/job/member";

// HMAC-SHA256 of `nonce` under `secret`, in hex.
std::string job_proof(std::string_view secret, std::string_view nonce);
// The nonce the server gives connection `connection`: SHA-256 of its `salt` and the id, in hex.
std::string job_nonce(std::string_view salt, unsigned long long connection);
// Random bytes for a server's salt (OpenSSL's generator).
std::string random_salt();

// The secret in the file `path`: its content without the trailing newline. Throws ConfigError
// naming the file (`what` says which setting named it) when it cannot be read, is empty, or can be
// read by others than its owner (mode 0600 or stricter, as ssh asks of a key).
std::string read_job_secret(const std::string& path, const std::string& what);

}  // namespace acc::rendezvous
