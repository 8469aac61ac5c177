#include "http/response.h"

#include "wire/error.h"
#include "wire/json_writer.h"

namespace delayq::http {

int HttpStatusOf(Code code) {
  switch (code) {
    case Code::kOk: return 200;
    case Code::kInvalidArgument: return 400;
    case Code::kUnauthenticated: return 401;
    case Code::kNotFound: return 404;
    case Code::kConflict: return 409;
    case Code::kLeaseExpired: return 409;
    case Code::kTooLarge: return 413;
    case Code::kResourceExhausted: return 429;
    case Code::kUnavailable: return 503;
    case Code::kIoError: return 503;
    case Code::kCorruption: return 500;
    case Code::kInternal: return 500;
  }
  return 500;
}

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse ErrorResponse(const Status& s) {
  return JsonResponse(HttpStatusOf(s.code()), wire::ErrorBody(s.code(), s.message()));
}

HttpResponse ErrorResponse(int status, std::string_view code, std::string_view message) {
  wire::JsonWriter w;
  w.BeginObject().Key("error").BeginObject();
  w.Key("code").String(code).Key("message").String(message);
  w.EndObject().EndObject();
  return JsonResponse(status, w.Take());
}

}  // namespace delayq::http
