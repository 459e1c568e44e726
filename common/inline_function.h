// A move-only function wrapper that keeps callables of up to `kInlineBytes` inside itself.
//
// std::function (libstdc++) stores a callable in place only when it is trivially copyable
// and at most 16 bytes; a lambda holding a shared_ptr goes to the heap. absl::AnyInvocable
// keeps 16 bytes in place. A send's completion on the data path holds two shared_ptrs (the
// slab and an in-flight count), which made one allocation and one free per batch served.
// InlineFunction keeps such a callable in its own 48 bytes, moves it with one indirect call
// and goes to the heap only for bigger ones.
//
//   InlineFunction<void(absl::Status)> done = [slab = std::move(slab)](absl::Status s) { ... };
//   OtherThing(std::move(done));  // moves the lambda: no allocation
//   if (done) done(absl::OkStatus());
#ifndef SLUICE_COMMON_INLINE_FUNCTION_H_
#define SLUICE_COMMON_INLINE_FUNCTION_H_

#include <cstddef>
#include <functional>
#include <new>
#include <type_traits>
#include <utility>

namespace sluice {

template <typename Signature, size_t kInlineBytes = 48>
class InlineFunction;

template <typename R, typename... Args, size_t kInlineBytes>
class InlineFunction<R(Args...), kInlineBytes> {
 public:
  InlineFunction() noexcept = default;
  InlineFunction(std::nullptr_t) noexcept {}  // NOLINT: like std::function

  // Any callable with this signature; a null function pointer or an empty std::function
  // makes an empty InlineFunction, as they do for std::function.
  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, InlineFunction> &&
                                        std::is_invocable_r_v<R, D&, Args...>>>
  InlineFunction(F&& f) {  // NOLINT: implicit, like std::function
    if constexpr (std::is_pointer_v<D> || std::is_member_pointer_v<D>) {
      if (f == nullptr) return;
    } else if constexpr (IsFunctionWrapper<D>::value) {
      if (!f) return;
    }
    if constexpr (kFitsInline<D>) {
      ::new (static_cast<void*>(storage_)) D(std::forward<F>(f));
      ops_ = &kInlineOps<D>;
    } else {
      *reinterpret_cast<D**>(storage_) = new D(std::forward<F>(f));
      ops_ = &kHeapOps<D>;
    }
  }

  InlineFunction(InlineFunction&& other) noexcept : ops_(other.ops_) {
    if (ops_ != nullptr) {
      ops_->relocate(other.storage_, storage_);
      other.ops_ = nullptr;
    }
  }
  InlineFunction& operator=(InlineFunction&& other) noexcept {
    if (this != &other) {
      // Out of `other` first: it may belong to the callable this one drops.
      InlineFunction taken(std::move(other));
      Reset();
      if (taken.ops_ != nullptr) {
        taken.ops_->relocate(taken.storage_, storage_);
        ops_ = std::exchange(taken.ops_, nullptr);
      }
    }
    return *this;
  }
  InlineFunction& operator=(std::nullptr_t) noexcept {
    Reset();
    return *this;
  }
  InlineFunction(const InlineFunction&) = delete;
  InlineFunction& operator=(const InlineFunction&) = delete;
  ~InlineFunction() { Reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }

  // Calling an empty InlineFunction is a bug, as it is for std::function (which throws).
  R operator()(Args... args) { return ops_->invoke(storage_, std::forward<Args>(args)...); }

  // Whether a callable of type F is kept in place (no allocation).
  template <typename F>
  static constexpr bool StoresInline() {
    return kFitsInline<std::decay_t<F>>;
  }

 private:
  struct Ops {
    R (*invoke)(void* storage, Args&&... args);
    // Move-constructs `to` from `from` and destroys what is left in `from`.
    void (*relocate)(void* from, void* to) noexcept;
    void (*destroy)(void* storage) noexcept;
  };

  // Wrappers that may be empty: an empty one makes an empty InlineFunction.
  template <typename T>
  struct IsFunctionWrapper : std::false_type {};
  template <typename S>
  struct IsFunctionWrapper<std::function<S>> : std::true_type {};
  template <typename S, size_t kBytes>
  struct IsFunctionWrapper<InlineFunction<S, kBytes>> : std::true_type {};

  template <typename D>
  static constexpr bool kFitsInline =
      sizeof(D) <= kInlineBytes &&
      alignof(D) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<D>;

  template <typename D>
  static constexpr Ops kInlineOps = {
      [](void* storage, Args&&... args) -> R {
        return std::invoke(*std::launder(static_cast<D*>(storage)), std::forward<Args>(args)...);
      },
      [](void* from, void* to) noexcept {
        D* source = std::launder(static_cast<D*>(from));
        ::new (to) D(std::move(*source));
        source->~D();
      },
      [](void* storage) noexcept { std::launder(static_cast<D*>(storage))->~D(); },
  };

  template <typename D>
  static constexpr Ops kHeapOps = {
      [](void* storage, Args&&... args) -> R {
        return std::invoke(**static_cast<D**>(storage), std::forward<Args>(args)...);
      },
      [](void* from, void* to) noexcept { *static_cast<D**>(to) = *static_cast<D**>(from); },
      [](void* storage) noexcept { delete *static_cast<D**>(storage); },
  };

  void Reset() noexcept {
    if (ops_ != nullptr) std::exchange(ops_, nullptr)->destroy(storage_);
  }

  alignas(std::max_align_t) std::byte storage_[kInlineBytes];
  const Ops* ops_ = nullptr;
};

}  // namespace sluice

#endif  // SLUICE_COMMON_INLINE_FUNCTION_H_
