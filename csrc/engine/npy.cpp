#include "engine/npy.h"

#include <cstring>
#include <fstream>

#include "runtime/error.h"

namespace twgpu::engine {

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& msg) {
  fail(ErrorKind::InvalidArgument, path + ": " + msg);
}

struct Descr {
  const char* text;
  DType dtype;
};
constexpr Descr kDescrs[] = {
    {"<f4", DType::Float32}, {"<f2", DType::Float16}, {"<i8", DType::Int64},
    {"<i4", DType::Int32},   {"<i2", DType::Int16},   {"|i1", DType::Int8},
    {"|u1", DType::UInt8},   {"|b1", DType::Bool},
};

// The text after `key': ` in the header dict, up to (not including) the end char.
std::string dict_field(const std::string& header, const std::string& key, const std::string& path) {
  const std::string k = "'" + key + "':";
  size_t at = header.find(k);
  if (at == std::string::npos) bad(path, "npy header has no '" + key + "'");
  at += k.size();
  while (at < header.size() && header[at] == ' ') ++at;
  return header.substr(at);
}

}  // namespace

HostTensor read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) bad(path, "cannot open");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) bad(path, "not a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) bad(path, "truncated header");
    uint32_t n = 0;
    std::memcpy(&n, bytes.data() + 8, 4);
    header_len = n;
    start = 12;
  } else {
    bad(path, "unknown .npy version " + std::to_string(major));
  }
  if (start + header_len > bytes.size()) bad(path, "truncated header");
  const std::string header = bytes.substr(start, header_len);
  HostTensor t;
  const std::string descr = dict_field(header, "descr", path);
  bool known = false;
  for (const Descr& d : kDescrs)
    if (descr.compare(1, 3, d.text) == 0) {
      t.dtype = d.dtype;
      known = true;
    }
  if (!known) bad(path, "unsupported dtype " + descr.substr(0, descr.find(',')));
  if (dict_field(header, "fortran_order", path).compare(0, 5, "False") != 0)
    bad(path, "Fortran-ordered arrays are not supported");
  const std::string shape = dict_field(header, "shape", path);
  if (shape.empty() || shape[0] != '(') bad(path, "bad shape in the npy header");
  size_t i = 1;
  while (i < shape.size() && shape[i] != ')') {
    if (shape[i] == ' ' || shape[i] == ',') { ++i; continue; }
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(shape.substr(i), &used);
    } catch (const std::exception&) {
      bad(path, "bad shape in the npy header");
    }
    if (v < 0) bad(path, "negative size in the npy header");
    t.shape.push_back(v);
    i += used;
  }
  const uint64_t nbytes = t.numel() * static_cast<uint64_t>(element_size(t.dtype));
  const size_t data = start + header_len;
  if (bytes.size() - data != nbytes)
    bad(path, "holds " + std::to_string(bytes.size() - data) + " data bytes, the header says " +
                  std::to_string(nbytes));
  t.data.assign(bytes.begin() + data, bytes.end());
  return t;
}

void write_npy(const std::string& path, const HostTensor& t) {
  const char* descr = nullptr;
  for (const Descr& d : kDescrs)
    if (d.dtype == t.dtype) descr = d.text;
  if (!descr) bad(path, std::string("no .npy dtype for ") + dtype_name(t.dtype));
  std::string shape = "(";
  for (size_t d = 0; d < t.shape.size(); ++d) shape += std::to_string(t.shape[d]) + (t.shape.size() == 1 ? "," : d + 1 < t.shape.size() ? ", " : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Data starts at a multiple of 64 bytes; the header ends with a newline.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) bad(path, "cannot write");
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t n = static_cast<uint16_t>(header.size());
  const char len[2] = {static_cast<char>(n & 0xFF), static_cast<char>(n >> 8)};
  f.write(len, 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  if (!f) bad(path, "write failed");
}

}  // namespace twgpu::engine
