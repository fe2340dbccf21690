// Keeping CUDA torch's accelerator when torch_webgpu is imported next to a usable CUDA GPU.
//
// PyTorch (2.8 and later; pytorch#161129) names one accelerator per process and returns
// PrivateUse1 from at::accelerator::getAccelerator() as soon as any PrivateUse1 backend is
// registered. The autograd engine takes a node's stream from that accelerator type only
// (Node::stream()), so every CUDA backward then fails with "opt_ready_stream &&
// opt_parent_stream INTERNAL ASSERT FAILED", and torch.accelerator reports webgpu.
//
// PyTorch offers no switch for this, so when CUDA is usable we redirect the two functions as
// libtorch itself calls them (through its procedure linkage table, i.e. the GOT slots that
// the dynamic linker filled in): getAccelerator() answers CUDA, and isAccelerator() no longer
// counts PrivateUse1. Autograd then treats webgpu tensors like CPU ones, which is exact for
// us: one WebGPU queue orders all work, so there is no stream to synchronise. Nothing is
// changed on machines without CUDA. TORCH_WEBGPU_ACCELERATOR=webgpu keeps PyTorch's choice.
#include <ATen/DeviceAccelerator.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <optional>

namespace twgpu::aten {
namespace {

using GetAcceleratorFn = std::optional<c10::DeviceType> (*)(bool);
using IsAcceleratorFn = bool (*)(c10::DeviceType);

IsAcceleratorFn g_is_accelerator = nullptr;  // PyTorch's own, called for other types

std::optional<c10::DeviceType> cuda_accelerator(bool /*checked*/) { return c10::DeviceType::CUDA; }

bool accelerator_without_webgpu(c10::DeviceType type) {
  return type != c10::DeviceType::PrivateUse1 && g_is_accelerator(type);
}

struct Redirect {
  const char* symbol;  // mangled name as libtorch imports it
  void* target;
  int patched = 0;
};

// The dynamic section's pointers are absolute once glibc relocated them (x86-64, aarch64),
// and file offsets where it did not.
uintptr_t dyn_ptr(const dl_phdr_info* info, ElfW(Addr) value) {
  return value < info->dlpi_addr ? info->dlpi_addr + value : value;
}

// The slot sits either in the RELRO range that the loader made read-only after binding, or in
// a writable table that lazy binding keeps updating: leave each page as it was.
bool write_slot(const dl_phdr_info* info, void** slot, void* value) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t address = reinterpret_cast<uintptr_t>(slot);
  bool read_only = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_GNU_RELRO) continue;
    const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    read_only = address >= begin && address < begin + ph.p_memsz;
  }
  if (!read_only) {
    *slot = value;
    return true;
  }
  void* start = reinterpret_cast<void*>(address & ~(page - 1));
  if (mprotect(start, page, PROT_READ | PROT_WRITE) != 0) return false;
  *slot = value;
  mprotect(start, page, PROT_READ);
  return true;
}

void patch_relocations(const dl_phdr_info* info, const ElfW(Rela) * rela, size_t bytes,
                       const ElfW(Sym) * symtab, const char* strtab, Redirect* redirects,
                       int count) {
  for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
    const auto type = ELF64_R_TYPE(rela[i].r_info);
#if defined(__x86_64__)
    if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
#elif defined(__aarch64__)
    if (type != R_AARCH64_JUMP_SLOT && type != R_AARCH64_GLOB_DAT) continue;
#endif
    const char* name = strtab + symtab[ELF64_R_SYM(rela[i].r_info)].st_name;
    for (int r = 0; r < count; ++r) {
      if (std::strcmp(name, redirects[r].symbol) != 0) continue;
      if (write_slot(info, reinterpret_cast<void**>(info->dlpi_addr + rela[i].r_offset),
                     redirects[r].target))
        ++redirects[r].patched;
    }
  }
}

int patch_object(dl_phdr_info* info, size_t, void* data) {
  auto* redirects = static_cast<Redirect*>(data);
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 0;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Rela)* jmprel = nullptr;
  const ElfW(Rela)* rela = nullptr;
  size_t jmprel_bytes = 0, rela_bytes = 0;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    switch (dyn->d_tag) {
      case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(dyn_ptr(info, dyn->d_un.d_ptr)); break;
      case DT_STRTAB: strtab = reinterpret_cast<const char*>(dyn_ptr(info, dyn->d_un.d_ptr)); break;
      case DT_JMPREL: jmprel = reinterpret_cast<const ElfW(Rela)*>(dyn_ptr(info, dyn->d_un.d_ptr)); break;
      case DT_PLTRELSZ: jmprel_bytes = dyn->d_un.d_val; break;
      case DT_RELA: rela = reinterpret_cast<const ElfW(Rela)*>(dyn_ptr(info, dyn->d_un.d_ptr)); break;
      case DT_RELASZ: rela_bytes = dyn->d_un.d_val; break;
      default: break;
    }
  }
  if (!symtab || !strtab) return 0;
  if (jmprel) patch_relocations(info, jmprel, jmprel_bytes, symtab, strtab, redirects, 2);
  if (rela) patch_relocations(info, rela, rela_bytes, symtab, strtab, redirects, 2);
  return 0;
}

}  // namespace

// Returns how many call slots now lead to the CUDA-preferring versions (0: none found).
int keep_cuda_as_accelerator() {
  static int patched = -1;
  if (patched >= 0) return patched;
  g_is_accelerator = &at::accelerator::isAccelerator;  // resolved through our own table
  Redirect redirects[2] = {
      {"_ZN2at11accelerator14getAcceleratorEb", reinterpret_cast<void*>(&cuda_accelerator)},
      {"_ZN2at11accelerator13isAcceleratorEN3c1010DeviceTypeE",
       reinterpret_cast<void*>(&accelerator_without_webgpu)},
  };
  dl_iterate_phdr(&patch_object, redirects);
  patched = redirects[0].patched + redirects[1].patched;
  return patched;
}

}  // namespace twgpu::aten
