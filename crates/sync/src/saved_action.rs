//! `SavedAction`: the action a signal had before ours was installed, saved for our handler to
//! chain to faults that are not ours.
//!
//! `sigaction(sig, &ours, &previous)` installs ours and only then copies the old action out:
//! another thread's signal in between runs our handler, which would chain to a `previous` not
//! yet written. So `install` reads the action first, publishes it, and only then installs ours;
//! the handler reads the saved action with one Acquire load, and never one that is not
//! published (`get` is None before).
//!
//! A program that changes the action at the same time: if its change lands between our read
//! and our install, our install replaces it; the action we replaced is then saved again, so we
//! chain to the program's newer choice from the moment `install` returns (in between, to the
//! one it had before, which it installed too). A change after our install replaces ours: the
//! program's choice, as without us.
//!
//! Each of the two slots is written once, before it is published, and never again, so a read
//! never meets a write.

use core::mem::MaybeUninit;

use crate::shim::{AtomicBool, AtomicUsize, Ordering};
use crate::slot_cell::SlotCell;

/// The system's side of `sigaction(2)` for one signal (the preload's calls it; the models
/// simulate it).
pub trait Sigaction {
    type Action: Copy;
    /// The action now: `sigaction(sig, NULL, &old)`.
    fn current(&mut self) -> Self::Action;
    /// Installs `new` and returns the action it replaced: `sigaction(sig, &new, &old)`.
    fn replace(&mut self, new: &Self::Action) -> Self::Action;
    /// Whether two actions are the same (handler and flags).
    fn same(a: &Self::Action, b: &Self::Action) -> bool;
}

/// The previous action of one signal (the module's doc). Usable from a `static` and from the
/// signal handler.
pub struct SavedAction<T> {
    slots: [SlotCell<MaybeUninit<T>>; 2],
    /// How many slots are published: the newest is `slots[published - 1]`.
    published: AtomicUsize,
    /// Set by the one `install`.
    installing: AtomicBool,
}

// SAFETY: a slot is written once by the installing thread before it is published (Release) and
// only read after (Acquire); T: Send moves the value to the reading thread.
unsafe impl<T: Send> Sync for SavedAction<T> {}

impl<T: Copy> SavedAction<T> {
    /// Nothing saved (const: for a `static`).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        SavedAction {
            slots: [const { SlotCell::new(MaybeUninit::uninit()) }; 2],
            published: AtomicUsize::new(0),
            installing: AtomicBool::new(false),
        }
    }

    /// Nothing saved (loom's atomics are not const).
    #[cfg(loom)]
    pub fn new() -> Self {
        SavedAction {
            slots: core::array::from_fn(|_| SlotCell::new(MaybeUninit::uninit())),
            published: AtomicUsize::new(0),
            installing: AtomicBool::new(false),
        }
    }

    /// The action saved last; None before `install` saved one. Async-signal-safe.
    pub fn get(&self) -> Option<T> {
        // Acquire: pairs with `publish`'s Release: the slot's value is written.
        let n = self.published.load(Ordering::Acquire);
        let slot = self.slots.get(n.checked_sub(1)?)?;
        // SAFETY: slot n - 1 was written before `published` became n, and is never written
        // again.
        Some(slot.with(|p| unsafe { (*p).assume_init() }))
    }

    /// Saves `v` in the next slot; by the installing thread only.
    fn publish(&self, v: T) {
        // Relaxed: only the installing thread writes `published`.
        let n = self.published.load(Ordering::Relaxed);
        let Some(slot) = self.slots.get(n) else {
            return;
        };
        // SAFETY: slot n is not published yet, so no reader touches it, and the one installing
        // thread writes it once.
        slot.with_mut(|p| unsafe { (*p).write(v) });
        // Release: the slot's value is written before a reader that sees n + 1 reads it.
        self.published.store(n + 1, Ordering::Release);
    }

    /// Installs `ours` through `sys`, having saved the action it replaces first (the module's
    /// doc). Only the first call installs; later ones return false and do nothing.
    pub fn install<S: Sigaction<Action = T>>(&self, sys: &mut S, ours: &T) -> bool {
        // Relaxed: only decides which caller installs; the slots are ordered by `published`.
        if self.installing.swap(true, Ordering::Relaxed) {
            return false;
        }
        let before = sys.current();
        self.publish(before);
        let replaced = sys.replace(ours);
        if !S::same(&replaced, &before) {
            // The program changed the action between our two calls: chain to its change.
            self.publish(replaced);
        }
        true
    }
}

impl<T: Copy> Default for SavedAction<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A signal's action, with a change made by "the program" at a chosen call.
    struct Sim {
        action: u32,
        calls: u32,
        change_at: u32,
        change_to: u32,
    }

    impl Sim {
        fn maybe_change(&mut self) {
            self.calls += 1;
            if self.calls == self.change_at {
                self.action = self.change_to;
            }
        }
    }

    impl Sigaction for Sim {
        type Action = u32;
        fn current(&mut self) -> u32 {
            self.maybe_change();
            self.action
        }
        fn replace(&mut self, new: &u32) -> u32 {
            self.maybe_change();
            std::mem::replace(&mut self.action, *new)
        }
        fn same(a: &u32, b: &u32) -> bool {
            a == b
        }
    }

    #[test]
    fn the_previous_action_is_saved_before_ours_is_installed() {
        let saved = SavedAction::new();
        assert_eq!(saved.get(), None);
        let mut sim = Sim {
            action: 7,
            calls: 0,
            change_at: 0,
            change_to: 0,
        };
        assert!(saved.install(&mut sim, &9));
        assert_eq!(sim.action, 9);
        assert_eq!(saved.get(), Some(7));
        assert!(!saved.install(&mut sim, &10), "installed once");
        assert_eq!((sim.action, saved.get()), (9, Some(7)));
    }

    #[test]
    fn a_change_between_the_read_and_the_install_is_chained_to() {
        let saved = SavedAction::new();
        // The program installs 8 just before our install (the second call).
        let mut sim = Sim {
            action: 7,
            calls: 0,
            change_at: 2,
            change_to: 8,
        };
        assert!(saved.install(&mut sim, &9));
        assert_eq!((sim.action, saved.get()), (9, Some(8)));
    }
}

// Every role runs in a spawned thread; the model's main thread only sets up and joins.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::AtomicU32;
    use loom::sync::Arc;
    use loom::thread;

    const PROGRAM: u32 = 7;
    const PROGRAM_LATER: u32 = 8;
    const OURS: u32 = 9;

    /// The kernel's action for the signal (sigaction(2) is atomic).
    #[derive(Clone)]
    struct Kernel(Arc<AtomicU32>);

    impl Sigaction for Kernel {
        type Action = u32;
        fn current(&mut self) -> u32 {
            self.0.load(Ordering::SeqCst)
        }
        fn replace(&mut self, new: &u32) -> u32 {
            self.0.swap(*new, Ordering::SeqCst)
        }
        fn same(a: &u32, b: &u32) -> bool {
            a == b
        }
    }

    /// Another thread's SIGSEGV while ours is being installed: if our handler runs, the action
    /// it chains to is published, and is the program's.
    #[test]
    fn a_signal_during_install_chains_to_the_program() {
        loom::model(|| {
            let kernel = Kernel(Arc::new(AtomicU32::new(PROGRAM)));
            let saved = Arc::new(SavedAction::new());
            let installer = {
                let (mut kernel, saved) = (kernel.clone(), saved.clone());
                thread::spawn(move || assert!(saved.install(&mut kernel, &OURS)))
            };
            let signal = {
                let (kernel, saved) = (kernel.clone(), saved.clone());
                thread::spawn(move || {
                    if kernel.0.load(Ordering::SeqCst) == OURS {
                        assert_eq!(saved.get(), Some(PROGRAM), "chained to an unsaved action");
                    }
                })
            };
            installer.join().unwrap();
            signal.join().unwrap();
            assert_eq!(kernel.0.load(Ordering::SeqCst), OURS);
            assert_eq!(saved.get(), Some(PROGRAM));
        });
    }

    /// The program changes the action while we install ours: our handler always chains to an
    /// action the program installed, and once both are done, if ours is the action, it chains
    /// to the program's latest.
    #[test]
    fn a_concurrent_change_by_the_program_is_kept() {
        loom::model(|| {
            let kernel = Kernel(Arc::new(AtomicU32::new(PROGRAM)));
            let saved = Arc::new(SavedAction::new());
            let installer = {
                let (mut kernel, saved) = (kernel.clone(), saved.clone());
                thread::spawn(move || assert!(saved.install(&mut kernel, &OURS)))
            };
            let program = {
                let kernel = kernel.clone();
                thread::spawn(move || kernel.0.swap(PROGRAM_LATER, Ordering::SeqCst))
            };
            let signal = {
                let (kernel, saved) = (kernel.clone(), saved.clone());
                thread::spawn(move || {
                    if kernel.0.load(Ordering::SeqCst) == OURS {
                        let prev = saved.get();
                        assert!(
                            prev == Some(PROGRAM) || prev == Some(PROGRAM_LATER),
                            "chained to {prev:?}"
                        );
                    }
                })
            };
            installer.join().unwrap();
            program.join().unwrap();
            signal.join().unwrap();
            match kernel.0.load(Ordering::SeqCst) {
                OURS => assert_eq!(saved.get(), Some(PROGRAM_LATER)),
                now => assert_eq!(now, PROGRAM_LATER, "the program's own change stands"),
            }
        });
    }
}
