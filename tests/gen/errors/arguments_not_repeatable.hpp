// A retry or a hedge passes the arguments again; some parameters cannot be passed twice.
#include <string>

class Mailer {
 public:
  virtual ~Mailer() = default;
  [[r4c::retry]]
  virtual void send(std::string&& message) = 0;
  [[r4c::hedge]]
  virtual void fill(std::string& out) = 0;
};
