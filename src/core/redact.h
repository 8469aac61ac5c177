// Secrets out of a connection string before it is shown (an error, a log line, /v1/version).
#pragma once

#include <string>
#include <string_view>

namespace delayq {

// Masks, as ***, the password of a URI's user info (everything from the user's colon to the '@'
// that ends the user info as libpq reads it: a password with an unencoded '@', '/', '?' or '#' is
// masked whole), and the value
// of every parameter whose name ends in "password", in any case (password=, sentinel_password=,
// sslpassword=, PASSWORD=), in a URI's query or a libpq key=value string, quoted or not. What is
// not a connection string comes back as it was.
std::string RedactSecrets(std::string_view text);

// `message` (a library's error about `connection`) with every secret of `connection` masked
// wherever it appears, whole, percent-decoded or in pieces: libpq quotes a password it could not
// parse ("invalid percent-encoded token", the part before a '/' taken for a port).
std::string RedactSecretsIn(std::string_view message, std::string_view connection);

}  // namespace delayq
