// Secrets out of a connection string before it is shown (an error, a log line, /v1/version).
#pragma once

#include <string>
#include <string_view>

namespace delayq {

// Masks, as ***, the password of a URI's user info (everything from the user's colon to the last
// '@' before the query: a password with an unencoded '@' or '/' is masked whole), and the value
// of every parameter whose name ends in "password", in any case (password=, sentinel_password=,
// sslpassword=, PASSWORD=), in a URI's query or a libpq key=value string, quoted or not. What is
// not a connection string comes back as it was.
std::string RedactSecrets(std::string_view text);

}  // namespace delayq
