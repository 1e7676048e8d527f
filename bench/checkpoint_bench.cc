// tandem-bench-ckpt: speed of SaveCheckpoint / LoadCheckpoint on a realistic state of a
// given size, against the disk's sequential write (with fdatasync) and read of a plain
// file of the same size measured in the same run; CRC32C throughput per core; deflate
// (igzip level 1) ratio and speed per section kind.
//
// Timing: steady clock, median of --reps runs. Before each plain read and each load the
// file is evicted from the page cache (fdatasync + posix_fadvise DONTNEED, no root
// needed), so both read the disk; where a file system ignores the advice, both would be
// page-cache reads (then the plain read reports many GB/s: compare the two figures).
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/compress.h"
#include "checkpoint/crc.h"
#include "engine/master_codec.h"
#include "engine/q8_codec.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tandem/version.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace tandem;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Fast normal-ish numbers: sum of 4 uniforms (Irwin-Hall), scaled to unit variance.
struct Rng {
  uint64_t s;
  uint32_t Next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<uint32_t>(s >> 16);
  }
  float Normal() {
    float u = 0;
    for (int i = 0; i < 4; ++i) u += static_cast<float>(Next()) * (1.0f / 4294967296.0f);
    return (u - 2.0f) * 1.7320508f;
  }
};

// A tensor whose state looks like training's: weights ~ N(0, 0.02), m ~ N(0, 1e-3)
// with per-row magnitude changes, v ~ m^2-ish, encoded with the library's real codecs.
TensorSnapshot MakeTensor(const std::string& name, size_t n, const StateFormats& f, Rng* rng) {
  TensorSnapshot t;
  t.name = name;
  t.formats = f;
  t.numel = n;
  t.param_dtype = DType::kBF16;
  t.grad_dtype = DType::kBF16;
  const size_t groups = (n + kQuantGroup - 1) / kQuantGroup;
  if (f.master == MasterFormat::kF32) t.master_f32.resize(n);
  else t.master_bf16.resize(n);
  if (f.master == MasterFormat::kBF16Ecc8) t.ecc8.resize(n);
  if (f.master == MasterFormat::kBF16Ecc16) t.ecc16.resize(n);
  const bool mq = f.momentum == MomentFormat::kQ8, vq = f.variance == MomentFormat::kQ8;
  if (mq) { t.m_codes.resize(n); t.m_scales.resize(groups); } else t.m_f32.resize(n);
  if (vq) { t.v_codes.resize(n); t.v_scales.resize(groups); } else t.v_f32.resize(n);
  float m[kQuantGroup], u[kQuantGroup];
  for (size_t g = 0; g < groups; ++g) {
    const size_t b = g * kQuantGroup, e = std::min(n, b + kQuantGroup);
    const float row = 1e-3f * (0.25f + static_cast<float>(rng->Next() % 8) * 0.25f);
    float mmax = 0, umax = 0;
    for (size_t i = b; i < e; ++i) {
      const float w = 0.02f * rng->Normal();
      switch (f.master) {
        case MasterFormat::kF32: t.master_f32[i] = w; break;
        case MasterFormat::kBF16: t.master_bf16[i] = num::F32ToBf16(w); break;
        case MasterFormat::kBF16Ecc8: num::EncodeEcc8(w, &t.master_bf16[i], &t.ecc8[i]); break;
        case MasterFormat::kBF16Ecc16: num::EncodeEcc16(w, &t.master_bf16[i], &t.ecc16[i]); break;
      }
      m[i - b] = row * rng->Normal();
      u[i - b] = std::fabs(row * rng->Normal()) + 1e-6f;
      mmax = std::max(mmax, std::fabs(m[i - b]));
      umax = std::max(umax, u[i - b]);
    }
    const uint16_t ms = num::GroupScaleBits(mmax), us = num::GroupScaleBits(umax);
    for (size_t i = b; i < e; ++i) {
      if (mq) t.m_codes[i] = static_cast<uint8_t>(num::EncodeMomentum(m[i - b], 1.0f / num::Bf16ToF32(ms)));
      else t.m_f32[i] = m[i - b];
      if (vq) t.v_codes[i] = num::EncodeSqrtVariance(u[i - b], 1.0f / num::Bf16ToF32(us));
      else t.v_f32[i] = u[i - b] * u[i - b];
    }
    if (mq) t.m_scales[g] = ms;
    if (vq) t.v_scales[g] = us;
  }
  return t;
}

double StateBytesPerElement(const StateFormats& f) {
  double b = f.master == MasterFormat::kF32 ? 4 : f.master == MasterFormat::kBF16 ? 2
             : f.master == MasterFormat::kBF16Ecc8 ? 3 : 4;
  b += f.momentum == MomentFormat::kQ8 ? 1 + 2.0 / kQuantGroup : 4;
  b += f.variance == MomentFormat::kQ8 ? 1 + 2.0 / kQuantGroup : 4;
  return b;
}

OptimizerSnapshot MakeState(uint64_t bytes, const StateFormats& f, uint64_t tensor_elems) {
  OptimizerSnapshot s;
  s.algo = Algorithm::kAdamW;
  s.formats = f;
  s.groups.resize(1);
  s.step = 1000;
  const uint64_t total = static_cast<uint64_t>(bytes / StateBytesPerElement(f));
  Rng rng{0x9E3779B97F4A7C15ull};
  for (uint64_t done = 0, i = 0; done < total; ++i) {
    const uint64_t n = std::min(tensor_elems, total - done);
    s.tensors.push_back(MakeTensor("layers." + std::to_string(i) + ".weight", n, f, &rng));
    done += n;
  }
  return s;
}

uint64_t SnapshotBytes(const OptimizerSnapshot& s) {
  uint64_t b = 0;
  for (const auto& t : s.tensors)
    b += t.master_f32.size() * 4 + t.master_bf16.size() * 2 + t.ecc8.size() + t.ecc16.size() * 2 +
         t.m_f32.size() * 4 + t.v_f32.size() * 4 + t.m_codes.size() + t.v_codes.size() +
         t.m_scales.size() * 2 + t.v_scales.size() * 2;
  return b;
}

// Writes every array of s to a plain file with write(2) + fdatasync: the disk's speed
// for the same bytes, with no format, CRC or rename.
double PlainWrite(const OptimizerSnapshot& s, const std::string& path) {
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error(ErrorKind::kIO, "open " + path);
  auto put = [&](const void* p, size_t n) {
    auto* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd, c, std::min(n, size_t{1} << 30));
      if (w <= 0) throw Error(ErrorKind::kIO, "write " + path);
      c += w;
      n -= static_cast<size_t>(w);
    }
  };
  for (const auto& t : s.tensors) {
    put(t.master_bf16.data(), t.master_bf16.size() * 2);
    put(t.master_f32.data(), t.master_f32.size() * 4);
    put(t.ecc8.data(), t.ecc8.size());
    put(t.ecc16.data(), t.ecc16.size() * 2);
    put(t.m_f32.data(), t.m_f32.size() * 4);
    put(t.m_codes.data(), t.m_codes.size());
    put(t.m_scales.data(), t.m_scales.size() * 2);
    put(t.v_f32.data(), t.v_f32.size() * 4);
    put(t.v_codes.data(), t.v_codes.size());
    put(t.v_scales.data(), t.v_scales.size() * 2);
  }
  if (::fdatasync(fd) != 0) throw Error(ErrorKind::kIO, "fdatasync " + path);
  ::close(fd);
  return Seconds(t0, Clock::now());
}

// Evicts `path` from the page cache without root: its pages are clean after fdatasync,
// and POSIX_FADV_DONTNEED drops clean pages, so the next read goes to the disk.
void DropFromPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error(ErrorKind::kIO, "open " + path);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// Reads the plain file back in 4 MiB pieces into one buffer of its size.
double PlainRead(const std::string& path, std::vector<char>* buf) {
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error(ErrorKind::kIO, "open " + path);
  size_t off = 0;
  while (true) {
    const ssize_t r = ::pread(fd, buf->data() + off, std::min(buf->size() - off, size_t{4} << 20), off);
    if (r <= 0) break;
    off += static_cast<size_t>(r);
  }
  ::close(fd);
  return Seconds(t0, Clock::now());
}

struct KindStat {
  std::string kind;
  uint64_t bytes;
  double ratio, comp_gbs, decomp_gbs;
};

KindStat MeasureKind(const std::string& kind, const void* p, size_t n) {
  std::vector<uint8_t> z;
  auto t0 = Clock::now();
  const bool ok = ckpt::DeflateLevel1(p, n, n + n / 8 + 65536, &z);
  const double tc = Seconds(t0, Clock::now());
  if (!ok) return {kind, n, 1.0, 0, 0};
  std::vector<uint8_t> back(n);
  t0 = Clock::now();
  ckpt::Inflate(z.data(), z.size(), back.data(), n, kind);
  const double td = Seconds(t0, Clock::now());
  return {kind, n, static_cast<double>(n) / z.size(), n / tc / 1e9, n / td / 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tandem-bench-ckpt: checkpoint save/load vs the disk's sequential speed"};
  app.set_version_flag("--version", std::string("tandem-bench-ckpt ") + tandem::kVersion);
  double size_gb = 4.0;
  std::string dir = "/tmp", json_out, master = "bf16+ecc8", moments = "q8";
  int reps = 3;
  uint64_t tensor_elems = 64ull << 20;
  app.add_option("--size-gb", size_gb, "state size in GB (1e9 bytes)");
  app.add_option("--dir", dir, "directory on the disk to measure");
  app.add_option("--reps", reps, "repetitions (median reported)");
  app.add_option("--master", master, "master format: f32, bf16, bf16+ecc8, bf16+ecc16");
  app.add_option("--moments", moments, "m and v format: f32 or q8");
  app.add_option("--tensor-elems", tensor_elems, "elements per tensor");
  app.add_option("--json", json_out, "write results as JSON here");
  CLI11_PARSE(app, argc, argv);
  try {
    const StateFormats f{ParseMasterFormat(master), ParseMomentFormat(moments), ParseMomentFormat(moments)};
    std::printf("building a %.2f GB AdamW state (%s)...\n", size_gb, Name(f).c_str());
    OptimizerSnapshot s = MakeState(static_cast<uint64_t>(size_gb * 1e9), f, tensor_elems);
    const uint64_t bytes = SnapshotBytes(s);
    const std::string plain = dir + "/tandem_bench_plain.bin", ck = dir + "/tandem_bench.ckpt";

    std::vector<double> t_write, t_save, t_read, t_load, t_save_auto;
    uint64_t file_bytes = 0, file_bytes_auto = 0;
    for (int r = 0; r < reps; ++r) {
      t_write.push_back(PlainWrite(s, plain));
      auto t0 = Clock::now();
      SaveCheckpoint(s, ck);
      t_save.push_back(Seconds(t0, Clock::now()));
      file_bytes = InspectCheckpoint(ck).file_size;
      {
        std::vector<char> buf(bytes);
        DropFromPageCache(plain);  // cold: the disk's sequential read
        t_read.push_back(PlainRead(plain, &buf));
      }
      DropFromPageCache(ck);  // cold, like a resume on a fresh node
      t0 = Clock::now();
      OptimizerSnapshot back = LoadCheckpoint(ck);
      t_load.push_back(Seconds(t0, Clock::now()));
      if (r == 0 && !(back.tensors.size() == s.tensors.size() && back.tensors[0].master_bf16 == s.tensors[0].master_bf16))
        throw Error(ErrorKind::kInternal, "loaded state differs");
      std::printf("rep %d: write %.2fs save %.2fs read %.2fs load %.2fs\n", r, t_write.back(),
                  t_save.back(), t_read.back(), t_load.back());
    }
    {
      CheckpointOptions o;
      o.compression = CheckpointCompression::kAuto;
      const auto t0 = Clock::now();
      SaveCheckpoint(s, ck + ".auto", o);
      t_save_auto.push_back(Seconds(t0, Clock::now()));
      file_bytes_auto = InspectCheckpoint(ck + ".auto").file_size;
      const auto t1 = Clock::now();
      (void)LoadCheckpoint(ck + ".auto");
      t_save_auto.push_back(Seconds(t1, Clock::now()));
      ::unlink((ck + ".auto").c_str());
    }
    ::unlink(plain.c_str());
    ::unlink(ck.c_str());

    // CRC32C per core: in cache (1 MiB, repeated) and streaming over the whole state.
    std::vector<uint8_t> small(1 << 20, 0x5A);
    auto t0 = Clock::now();
    uint32_t c = 0;
    const int loops = 4096;
    for (int i = 0; i < loops; ++i) c = ckpt::Crc32c(small.data(), small.size(), c);
    const double crc_cache = loops * double(small.size()) / Seconds(t0, Clock::now()) / 1e9;
    t0 = Clock::now();
    for (const auto& t : s.tensors) c = ckpt::Crc32c(t.master_bf16.data(), t.master_bf16.size() * 2, c);
    uint64_t crc_bytes = 0;
    for (const auto& t : s.tensors) crc_bytes += t.master_bf16.size() * 2;
    const double crc_stream = crc_bytes / Seconds(t0, Clock::now()) / 1e9;

    // Deflate per kind, on 8 Mi-element samples of real-looking state in every format.
    std::vector<KindStat> kinds;
    {
      const size_t n = 8u << 20;
      Rng rng{12345};
      const TensorSnapshot a = MakeTensor("f32", n, {MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kF32}, &rng);
      const TensorSnapshot b = MakeTensor("q", n, {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}, &rng);
      const TensorSnapshot e = MakeTensor("e16", n, {MasterFormat::kBF16Ecc16, MomentFormat::kQ8, MomentFormat::kQ8}, &rng);
      kinds.push_back(MeasureKind("master_f32", a.master_f32.data(), n * 4));
      kinds.push_back(MeasureKind("master_bf16", b.master_bf16.data(), n * 2));
      kinds.push_back(MeasureKind("ecc8", b.ecc8.data(), n));
      kinds.push_back(MeasureKind("ecc16", e.ecc16.data(), n * 2));
      kinds.push_back(MeasureKind("m_f32", a.m_f32.data(), n * 4));
      kinds.push_back(MeasureKind("m_codes", b.m_codes.data(), n));
      kinds.push_back(MeasureKind("m_scales", b.m_scales.data(), b.m_scales.size() * 2));
      kinds.push_back(MeasureKind("v_f32", a.v_f32.data(), n * 4));
      kinds.push_back(MeasureKind("v_codes", b.v_codes.data(), n));
      kinds.push_back(MeasureKind("v_scales", b.v_scales.data(), b.v_scales.size() * 2));
    }

    const double gb = bytes / 1e9;
    const double w = gb / Median(t_write), sv = file_bytes / 1e9 / Median(t_save);
    const double rd = gb / Median(t_read), ld = file_bytes / 1e9 / Median(t_load);
    std::printf("\nstate %.3f GB (%s, %zu tensors), file %.3f GB, %d reps, dir %s\n", gb,
                Name(f).c_str(), s.tensors.size(), file_bytes / 1e9, reps, dir.c_str());
    std::printf("| what | median s | GB/s | vs disk |\n|---|---|---|---|\n");
    std::printf("| plain write + fdatasync (roofline) | %.2f | %.2f | 1.00 |\n", Median(t_write), w);
    std::printf("| SaveCheckpoint (none, fsync, rename) | %.2f | %.2f | %.2f |\n", Median(t_save), sv, sv / w);
    std::printf("| plain read, cold cache (roofline) | %.2f | %.2f | 1.00 |\n", Median(t_read), rd);
    std::printf("| LoadCheckpoint (verify all) | %.2f | %.2f | %.2f |\n", Median(t_load), ld, ld / rd);
    std::printf("| SaveCheckpoint auto-deflate (1 run) | %.2f | %.2f | file %.3f GB |\n", t_save_auto[0],
                file_bytes_auto / 1e9 / t_save_auto[0], file_bytes_auto / 1e9);
    std::printf("| LoadCheckpoint auto-deflate (1 run) | %.2f | %.2f (raw GB/s) | |\n", t_save_auto[1],
                gb / t_save_auto[1]);
    std::printf("\nCRC32C per core: %.2f GB/s in cache (1 MiB), %.2f GB/s streaming from DRAM\n",
                crc_cache, crc_stream);
    std::printf("\n| kind | sample MB | ratio | deflate GB/s | inflate GB/s |\n|---|---|---|---|---|\n");
    for (const auto& k : kinds)
      std::printf("| %s | %.1f | %.3f | %.2f | %.2f |\n", k.kind.c_str(), k.bytes / 1e6, k.ratio,
                  k.comp_gbs, k.decomp_gbs);
    if (!json_out.empty()) {
      std::ofstream o(json_out);
      char buf[512];
      o << "{\n  \"bench\": \"tandem-bench-ckpt\",\n  \"formats\": \"" << Name(f) << "\",\n";
      snprintf(buf, sizeof buf,
               "  \"state_bytes\": %llu,\n  \"file_bytes\": %llu,\n  \"reps\": %d,\n  \"dir\": \"%s\",\n"
               "  \"plain_write_fsync_gbs\": %.3f,\n  \"save_gbs\": %.3f,\n  \"save_vs_disk\": %.3f,\n"
               "  \"plain_read_gbs_cold\": %.3f,\n  \"load_gbs\": %.3f,\n  \"load_vs_read\": %.3f,\n",
               (unsigned long long)bytes, (unsigned long long)file_bytes, reps, dir.c_str(), w, sv, sv / w, rd, ld, ld / rd);
      o << buf;
      snprintf(buf, sizeof buf,
               "  \"save_auto_s\": %.3f,\n  \"file_bytes_auto\": %llu,\n  \"load_auto_s\": %.3f,\n"
               "  \"crc32c_gbs_per_core_cache\": %.3f,\n  \"crc32c_gbs_per_core_stream\": %.3f,\n",
               t_save_auto[0], (unsigned long long)file_bytes_auto, t_save_auto[1], crc_cache, crc_stream);
      o << buf << "  \"times_s\": {\"write\": [";
      for (size_t i = 0; i < t_write.size(); ++i) o << (i ? ", " : "") << t_write[i];
      o << "], \"save\": [";
      for (size_t i = 0; i < t_save.size(); ++i) o << (i ? ", " : "") << t_save[i];
      o << "], \"read\": [";
      for (size_t i = 0; i < t_read.size(); ++i) o << (i ? ", " : "") << t_read[i];
      o << "], \"load\": [";
      for (size_t i = 0; i < t_load.size(); ++i) o << (i ? ", " : "") << t_load[i];
      o << "]},\n  \"deflate_by_kind\": [\n";
      for (size_t i = 0; i < kinds.size(); ++i) {
        snprintf(buf, sizeof buf,
                 "    {\"kind\": \"%s\", \"sample_bytes\": %llu, \"ratio\": %.4f, \"deflate_gbs\": %.3f, \"inflate_gbs\": %.3f}%s\n",
                 kinds[i].kind.c_str(), (unsigned long long)kinds[i].bytes, kinds[i].ratio,
                 kinds[i].comp_gbs, kinds[i].decomp_gbs, i + 1 < kinds.size() ? "," : "");
        o << buf;
      }
      o << "  ]\n}\n";
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "tandem-bench-ckpt: %s\n", e.what());
    return 1;
  }
  return 0;
}
