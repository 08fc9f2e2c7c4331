/* SPDX-License-Identifier: MIT */
/*
 * The batchpipe ring: bounded, lock-free, batched, per-slot publication.
 *
 * DESIGN
 *
 * Two 64-bit words hold the positions, each in its own cache-line pair:
 *   prod.head = 2 * (next position to reserve) | closed-bit
 *   cons.head = 2 * (next position to consume)
 * Positions are 63-bit and wrap; slot of position p is slots[p & mask], and
 * the "lap tag" of p is bit log2(capacity) of p, i.e. the parity of its lap.
 *
 * A slot holds item | lap-tag. Items have bit 0 clear (ring.h says so), so a
 * slot tells by itself whether it holds the item of position p (tag matches
 * p's lap) or the stale item of p - capacity (opposite tag). It can hold
 * nothing older: p - capacity was written before it was consumed, and
 * consumption of p - capacity is what let a producer reserve p.
 *
 * Producers (multi): load prod.head, check room against a cached copy of
 * cons.head (reloaded only when the batch does not seem to fit), claim k
 * slots with ONE compare-and-swap, then store the k slots. There is no
 * producer tail: the slot stores are the publication, so a producer never
 * waits for an earlier producer to finish, and a producer preempted between
 * its CAS and its stores delays only the consumers that reach its slots (they
 * see "empty for now" and go on with their lives; nobody spins on it).
 *
 * Consumers (multi): load cons.head, read slots from there while their tag
 * matches, copying items out, then claim what they read with ONE CAS on
 * cons.head. Reading before claiming is safe: the CAS succeeds only if
 * cons.head did not move (positions never repeat), and while it has not
 * moved no producer may overwrite those slots (a producer needs cons.head
 * past p - capacity + ... to reserve p + capacity). So a consumer holds
 * nothing while it works and a preempted consumer blocks nobody. Consumers
 * never write slots: one 8-byte read per item.
 *
 * Single-producer / single-consumer sides use the same slots and replace the
 * CAS by a plain store of their own word.
 *
 * Close sets the closed bit in prod.head with an atomic OR; a producer's CAS
 * expects the bit clear, so no reservation can slip in after close. In
 * single-producer mode close is a producer-side operation (ring.h). Just
 * before, it sets closed_hint, in the read-mostly line: a consumer that
 * finds nothing ready reads the hint, and prod.head (for the end of the
 * stream) only once it is set, so empty polls do not take the producers'
 * line from a producer about to claim again (1x1, B=1: 27 -> 30 M
 * items/s).
 *
 * MEMORY ORDERING
 *
 *  (1) Item contents -> consumer. Producers issue one release fence, then
 *      relaxed slot stores; consumers do relaxed slot loads, then one acquire
 *      fence. Fence-to-fence synchronisation through the slot value: one
 *      publication per batch, free on x86.
 *  (2) Consumer's slot reads -> producer's overwrite. Consumers advance
 *      cons.head with release (CAS or store); producers read cons.head with
 *      acquire before reserving, so a slot is overwritten only after the
 *      read of its previous item. The producers' cached copy is passed on
 *      with release/acquire too, to keep that chain intact.
 *  (3) A consumer's slot read must not see an item older than p - capacity:
 *      cons.head is loaded with acquire (chain of (1) and (2)), which makes
 *      the write of p - capacity happen-before the read (coherence).
 *  The position CASes themselves need no ordering for the data: a claim
 *  does not publish anything. prod.head's reservation CAS is relaxed.
 *
 * FAST PATHS
 *
 * The public enqueue and dequeue calls first try the common case in a
 * straight line: the batch fits by the cached opposite position, its run
 * does not cross the end of the slot array, the one claim succeeds at the
 * first try (and, to enqueue, no high-water mark is kept). Batches of up
 * to LEAF_MAX items take a leaf path that makes no call (the inline leaf
 * runs of ring_slots.h: one item in a straight line, more by SSE2
 * accesses where they measured faster; at these sizes a call to the wide
 * runs costs more than it saves); one item takes it in a function of its
 * own (enqueue_one, dequeue_one), which needs few registers; longer
 * ones take the same path with the wide runs. Whatever the fast path does
 * not handle starts over on the general path (reserve/publish, take),
 * which handles everything; the fast path changes nothing before it hands
 * over, and the orderings are the same as the general path's, (1)-(3).
 *
 * WAITING
 *
 * Blocking calls sleep on the ring's two eventcounts (src/waitq.h): every
 * successful enqueue checks not-empty, every dequeue not-full. On a queue
 * in its default mode, with no sleeper, that is one load of a read-shared
 * line and no fence: the sleepers pay with a membarrier. A queue set to
 * waker fences (the pipeline's ingress) costs the waker a full fence per
 * check instead, and so does every queue of a process without membarrier.
 * The pipeline's egress rings skip both checks: their users sleep on
 * queues of their own, so the worker publishes with
 * bpi_ring_publish_quiet() and the sink takes with
 * bpi_ring_dequeue_burst_quiet(), and the rings are created
 * BPI_RING_QUIET so that no blocking call can sleep on them unwoken.
 * docs/wakeup.md has the whole protocol.
 */
#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <batchpipe/ring.h>

#include "src/base/alloc.h"
#include "src/ring_internal.h"
#include "src/ring_slots.h"
#include "src/wait_internal.h"

#define CLOSED	     UINT64_C(1)
#define PUBLIC_FLAGS (BP_RING_SP | BP_RING_SC | BP_RING_HWM)
#define likely(x)    __builtin_expect(!!(x), 1)
#define unlikely(x)  __builtin_expect(!!(x), 0)
#ifndef LEAF_MAX
#define LEAF_MAX 8u
#endif

/*
 * One fence per batch orders the relaxed slot accesses (see (1)); under
 * TSAN, which ignores fences, every slot access carries the ordering
 * instead (src/ring_slots.h).
 */
#if BP_TSAN
#define batch_release_fence() ((void)0)
#define batch_acquire_fence() ((void)0)
#else
#define batch_release_fence() atomic_thread_fence(memory_order_release)
#define batch_acquire_fence() atomic_thread_fence(memory_order_acquire)
#endif

struct bp_ring {
	/* read-mostly */
	uintptr_t *slots;
	uint64_t mask;
	unsigned shift; /* log2(capacity): lap tag is bit `shift` of a position
			 */
	unsigned capacity;
	unsigned flags;
	size_t alloc_size;
	uint64_t start;	    /* first position */
	unsigned hwm_shift; /* high-water sampling: log2 of the interval */
	_Atomic uint32_t wait_strategy; /* relaxed: a policy, not data */
	_Atomic uint32_t wait_spin_ns;
	_Atomic uint32_t wait_yields;
	/*
	 * 1 once closed (the bit in prod.head first): a consumer that finds
	 * nothing ready asks here whether to look for the end of the stream,
	 * instead of reading the producers' line on every empty poll (which
	 * took it from a producer that would claim again next).
	 */
	_Atomic uint32_t closed_hint;

	/* producers' line: the reservation word and their copy of cons.head */
	alignas(BP_FALSE_SHARING) _Atomic uint64_t prod_head;
	_Atomic uint64_t prod_cons_cache;

	/* consumers' line */
	alignas(BP_FALSE_SHARING) _Atomic uint64_t cons_head;

	alignas(BP_FALSE_SHARING) _Atomic uint64_t hwm;

	/* sleepers: each waitq is read by the side that wakes it */
	alignas(BP_FALSE_SHARING) struct bpi_waitq not_empty;
	alignas(BP_FALSE_SHARING) struct bpi_waitq not_full;

	alignas(BP_FALSE_SHARING) uintptr_t slot_storage[];
};

static inline uintptr_t lap_tag(const struct bp_ring *r, uint64_t pos)
{
	return (uintptr_t)(pos >> r->shift) & 1;
}

/* ---------------------------------------------------------------- create */

static pthread_once_t wide_once = PTHREAD_ONCE_INIT;

int bpi_ring_create_at(size_t capacity, unsigned flags, uint64_t start,
		       struct bp_ring **ringp)
{
	struct bp_ring *r;
	unsigned cap = 1, shift = 0;
	size_t size;

	pthread_once(&wide_once, bpi_slots_init);
	if (!ringp || capacity == 0 || capacity > BP_RING_MAX_CAPACITY ||
	    (flags & ~(PUBLIC_FLAGS | BPI_RING_QUIET)))
		return -EINVAL;
	while (cap < capacity) {
		cap <<= 1;
		shift++;
	}
	size = sizeof(*r) + (size_t)cap * sizeof(uintptr_t);
	r = bpi_alloc_aligned(size, BP_FALSE_SHARING);
	if (!r)
		return -ENOMEM;
	r->alloc_size = size;
	r->slots = r->slot_storage;
	r->capacity = cap;
	r->shift = shift;
	r->mask = cap - 1;
	r->flags = flags;
	r->hwm_shift = shift > 3 ? (shift - 3 < 8 ? shift - 3 : 8) : 0;
	start &= BPI_RING_POS_SPACE - 1;
	r->start = start;
	/*
	 * Each slot starts with the tag opposite to the lap of the first
	 * position that will use it, so it reads as "stale" until written.
	 */
	for (uint64_t p = start; p < start + cap; p++)
		r->slots[p & r->mask] = lap_tag(r, p) ^ 1;
	atomic_init(&r->prod_head, start << 1);
	atomic_init(&r->prod_cons_cache, start << 1);
	atomic_init(&r->cons_head, start << 1);
	atomic_init(&r->hwm, 0);
	bpi_waitq_init(&r->not_empty);
	bpi_waitq_init(&r->not_full);
	{
		struct bp_wait_policy p;

		bp_wait_policy_init(&p);
		atomic_init(&r->wait_strategy, p.strategy);
		atomic_init(&r->wait_spin_ns, p.spin_ns);
		atomic_init(&r->wait_yields, p.yields);
	}
	*ringp = r;
	return 0;
}

int bp_ring_create(size_t capacity, unsigned flags, struct bp_ring **ringp)
{
	if (flags & ~PUBLIC_FLAGS)
		return -EINVAL;
	return bpi_ring_create_at(capacity, flags, 0, ringp);
}

void bp_ring_destroy(struct bp_ring *r)
{
	if (!r)
		return;
	bpi_waitq_destroy(&r->not_empty); /* their eventfds, if made */
	bpi_waitq_destroy(&r->not_full);
	bpi_free_aligned(r, r->alloc_size, BP_FALSE_SHARING);
}

unsigned bp_ring_capacity(const struct bp_ring *r)
{
	return r->capacity;
}

unsigned bp_ring_flags(const struct bp_ring *r)
{
	return r->flags & PUBLIC_FLAGS;
}

/* --------------------------------------------------------------- enqueue */

/* Non-zero if any item has bit 0 set (it would forge a lap tag). */
static BP_ALWAYS_INLINE uintptr_t bad_items(void *const *items, unsigned n)
{
	uintptr_t a = 0;
	unsigned i = 0;

#if RING_SIMD
	if (n >= 8) {
		__m128i x = _mm_setzero_si128(), y = _mm_setzero_si128();

		for (; i + 4 <= n; i += 4) {
			x = _mm_or_si128(
				x, _mm_loadu_si128((const __m128i *)&items[i]));
			y = _mm_or_si128(
				y, _mm_loadu_si128(
					   (const __m128i *)&items[i + 2]));
		}
		x = _mm_or_si128(x, y);
		a = (uintptr_t)_mm_cvtsi128_si64(x) |
		    (uintptr_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(x, x));
	}
#endif
	return (a & 1) | leaf_odd(items + i, n - i);
}

/*
 * Reserve up to n slots (exactly n or none if `bulk`). Returns the count and
 * the first position in *posp, or -EPIPE. *freep gets the room left.
 */
static BP_ALWAYS_INLINE int reserve(struct bp_ring *r, unsigned n, bool bulk,
				    uint64_t *posp, unsigned *freep)
{
	const bool single = r->flags & BP_RING_SP;
	/* relaxed: the reservation publishes nothing (see ordering above) */
	uint64_t ph = atomic_load_explicit(&r->prod_head, memory_order_relaxed);
	/* acquire: pairs with the release that stored the cached copy */
	uint64_t ch =
		atomic_load_explicit(&r->prod_cons_cache, memory_order_acquire);
	bool fresh = false;
	int64_t room;
	unsigned k;

	for (;;) {
		int64_t used = (int64_t)((ph & ~CLOSED) - ch) >> 1;

		if (ph & CLOSED)
			return -EPIPE;
		if (unlikely(used < 0)) {
			/* our ph is older than the cached cons: reload it */
			ph = atomic_load_explicit(&r->prod_head,
						  memory_order_relaxed);
			continue;
		}
		room = (int64_t)r->capacity - used;
		if (unlikely(room < (int64_t)n && !fresh)) {
			/* acquire: pairs with consumers' release (2) */
			ch = atomic_load_explicit(&r->cons_head,
						  memory_order_acquire);
			/* release: passes (2) on to other producers */
			atomic_store_explicit(&r->prod_cons_cache, ch,
					      memory_order_release);
			fresh = true;
			continue;
		}
		if (room <= 0 || (bulk && room < (int64_t)n)) {
			if (freep)
				*freep = room > 0 ? (unsigned)room : 0;
			return 0;
		}
		k = room < (int64_t)n ? (unsigned)room : n;
		if (single) {
			/*
			 * relaxed: claiming before the stores keeps prod.head
			 * >= cons.head; the slot stores are the publication.
			 */
			atomic_store_explicit(&r->prod_head,
					      ph + 2 * (uint64_t)k,
					      memory_order_relaxed);
			break;
		}
		/* relaxed: the claim orders nothing; failure reloads ph */
		if (atomic_compare_exchange_weak_explicit(
			    &r->prod_head, &ph, ph + 2 * (uint64_t)k,
			    memory_order_relaxed, memory_order_relaxed))
			break;
		fresh = false;
	}
	*posp = ph >> 1;
	if (freep)
		*freep = (unsigned)(room - k);
	return (int)k;
}

/*
 * Store k items at positions pos.. (the publication, see (1)). A run of
 * up to LEAF_MAX that does not wrap goes as the fast paths' leaf runs do
 * (one item in a straight line), not through the wide runs' call.
 */
static BP_ALWAYS_INLINE void publish(struct bp_ring *r, uint64_t pos,
				     void *const *items, unsigned k)
{
	unsigned idx = (unsigned)(pos & r->mask);
	unsigned first = r->capacity - idx;
	uintptr_t tag = lap_tag(r, pos);

	/* release: item contents before the slot stores; pairs with (1) */
	batch_release_fence();
	if (likely(k <= first)) {
		if (k <= LEAF_MAX)
			leaf_store(&r->slots[idx], items, k, tag);
		else
			store_run(&r->slots[idx], items, k, tag);
		return;
	}
	store_run(&r->slots[idx], items, first, tag);
	/* the part after the wrap belongs to the next lap */
	store_run(r->slots, items + first, k - first, tag ^ 1);
}

/*
 * The high-water mark is sampled: reading the consumers' index costs a
 * cache miss when they are busy, so it is read only when a reservation
 * [pos, pos + k) crosses a multiple of 2^hwm_shift positions: once per
 * min(256, capacity / 8) items, and on every operation at least that big.
 * The sampling test is inline (a one-item publication pays a shift and a
 * compare, not a call); the sample is out of line.
 */
static __attribute__((noinline, cold)) void sample_high_water(struct bp_ring *r)
{
	/* relaxed: the mark is statistics, a snapshot is what it promises */
	uint64_t used =
		((atomic_load_explicit(&r->prod_head, memory_order_relaxed) &
		  ~CLOSED) -
		 atomic_load_explicit(&r->cons_head, memory_order_relaxed)) >>
		1;
	uint64_t old = atomic_load_explicit(&r->hwm, memory_order_relaxed);

	if (used > r->capacity)
		return; /* torn snapshot (cons read after a wrap): ignore */
	while (used > old && !atomic_compare_exchange_weak_explicit(
				     &r->hwm, &old, used, memory_order_relaxed,
				     memory_order_relaxed))
		;
}

static inline void note_high_water(struct bp_ring *r, uint64_t pos, unsigned k)
{
	if (((pos - 1) ^ (pos + k - 1)) >> r->hwm_shift != 0)
		sample_high_water(r);
}

static BP_ALWAYS_INLINE int enqueue(struct bp_ring *r, void *const *items,
				    unsigned n, bool bulk, unsigned *freep)
{
	uint64_t pos;
	int k;

	if (unlikely(n == 0 || !items)) {
		if (n && !items)
			return -EINVAL; /* *freep is not written on -EINVAL */
		if (freep)
			*freep = bp_ring_free_count(r);
		return 0;
	}
	if (unlikely(n > r->capacity)) {
		/* a bulk that big can never fit: retrying would spin forever */
		if (bulk)
			return -EINVAL;
		/* more than a ring's worth never goes in: check what could */
		n = r->capacity;
	}
	if (unlikely(bad_items(items, n)))
		return -EINVAL;
	k = reserve(r, n, bulk, &pos, freep);
	if (k <= 0)
		return k;
	publish(r, pos, items, (unsigned)k);
	if (r->flags & BP_RING_HWM)
		note_high_water(r, pos, (unsigned)k);
	bpi_waitq_wake(&r->not_empty);
	return k;
}

/* The general path, out of line: the fast path's fallback. */
static __attribute__((noinline)) int enqueue_slow(struct bp_ring *r,
						  void *const *items,
						  unsigned n, bool bulk,
						  unsigned *freep)
{
	return enqueue(r, items, n, bulk, freep);
}

/* Out of line, so that the fast paths make no call on their way: wake the
 * sleepers of q (there are some) and return k. */
static __attribute__((noinline)) int wake_and_return(struct bpi_waitq *q, int k)
{
	if (q->wake_one)
		bpi_waitq_wake_one_slow(q);
	else
		bpi_waitq_wake_all_slow(q);
	return k;
}

/* bpi_waitq_wake() for the fast paths: the check inline, the wake not. */
static BP_ALWAYS_INLINE int wake_fast(struct bpi_waitq *q, int k)
{
	/* relaxed: as in bpi_waitq_wake() */
	if (unlikely(bpi_waitq_has_sleepers(q) &&
		     (__atomic_load_n(&q->seq, __ATOMIC_RELAXED) & 1)))
		return wake_and_return(q, k);
	return k;
}

/*
 * The fast paths' claim of n slots from prod word ph, one try: a plain store
 * on a single-producer ring, else one CAS; false if another producer moved
 * the word first (the caller starts over on the general path).
 */
static BP_ALWAYS_INLINE bool claim_once(struct bp_ring *r, uint64_t ph,
					unsigned n)
{
	if (r->flags & BP_RING_SP) {
		/* relaxed: as in reserve(), the slot stores publish */
		atomic_store_explicit(&r->prod_head, ph + 2 * (uint64_t)n,
				      memory_order_relaxed);
		return true;
	}
	/* relaxed: the claim orders nothing (as in reserve()) */
	return atomic_compare_exchange_strong_explicit(
		&r->prod_head, &ph, ph + 2 * (uint64_t)n, memory_order_relaxed,
		memory_order_relaxed);
}

/*
 * The enqueue fast path (see FAST PATHS above): all n items fit by the
 * cached consumers' position, the run does not cross the end of the slot
 * array, the claim succeeds at the first try, no high-water mark. Anything
 * else starts over on the general path; nothing has changed by then.
 * `wide`: n may be over LEAF_MAX, and the runs use the wide (vector)
 * stores; without it n <= LEAF_MAX, the inline leaf runs, and the path is
 * a leaf, which saves the registers a call would need on every call.
 */
static BP_ALWAYS_INLINE int enqueue_fast(struct bp_ring *r, void *const *items,
					 unsigned n, bool bulk, unsigned *freep,
					 bool wide)
{
	const unsigned cap = r->capacity;
	uint64_t ph, ch, pos;
	uintptr_t bad, tag, *dst;
	int64_t room;
	unsigned idx;

	if (unlikely(!items || (r->flags & BP_RING_HWM)))
		return enqueue_slow(r, items, n, bulk, freep);
	/* relaxed and acquire: as in reserve() */
	ph = atomic_load_explicit(&r->prod_head, memory_order_relaxed);
	ch = atomic_load_explicit(&r->prod_cons_cache, memory_order_acquire);
	room = (int64_t)cap - ((int64_t)(ph - ch) >> 1);
	pos = ph >> 1;
	idx = (unsigned)(pos & r->mask);
	/* one item always fits before the array's end (idx <= mask) */
	if (unlikely((ph & CLOSED) || room < (int64_t)n ||
		     (n > 1 && idx + n > cap)))
		return enqueue_slow(r, items, n, bulk, freep);
	if (wide)
		bad = bad_items(items, n);
	else
		bad = leaf_odd(items, n);
	if (unlikely(bad & 1))
		return -EINVAL;
	if (unlikely(!claim_once(r, ph, n)))
		return enqueue_slow(r, items, n, bulk, freep);
	/* release: item contents before the slot stores; pairs with (1) */
	batch_release_fence();
	tag = lap_tag(r, pos);
	dst = &r->slots[idx];
	if (wide)
		store_run(dst, items, n, tag);
	else
		leaf_store(dst, items, n, tag);
	if (freep)
		*freep = (unsigned)(room - (int64_t)n);
	return wake_fast(&r->not_empty, (int)n);
}

static __attribute__((noinline)) int enqueue_wide(struct bp_ring *r,
						  void *const *items,
						  unsigned n, bool bulk,
						  unsigned *freep)
{
	/* 0 and oversized batches: the general path says what they get */
	if (unlikely(n - 1u >= r->capacity))
		return enqueue_slow(r, items, n, bulk, freep);
	return enqueue_fast(r, items, n, bulk, freep, true);
}

/*
 * One item (B=1): the leaf path for n == 1 as a function of its own, whose
 * few live values fit in the registers a call may use; inline in the
 * entry point, the leaf runs of up to LEAF_MAX items made it save six.
 */
static __attribute__((noinline)) int enqueue_one(struct bp_ring *r,
						 void *const *items, bool bulk,
						 unsigned *freep)
{
	return enqueue_fast(r, items, 1, bulk, freep, false);
}

/* 1..LEAF_MAX take the leaf (1 on its own); more, or 0, the wide path
 * (which sends 0 and oversized batches on to the general one). */
static BP_ALWAYS_INLINE int enqueue_entry(struct bp_ring *r, void *const *items,
					  unsigned n, bool bulk,
					  unsigned *freep)
{
	if (n == 1)
		return enqueue_one(r, items, bulk, freep);
	if (n - 1u < LEAF_MAX)
		return enqueue_fast(r, items, n, bulk, freep, false);
	return enqueue_wide(r, items, n, bulk, freep);
}

int bp_ring_enqueue_bulk(struct bp_ring *r, void *const *items, unsigned n,
			 unsigned *free_space)
{
	return enqueue_entry(r, items, n, true, free_space);
}

int bp_ring_enqueue_burst(struct bp_ring *r, void *const *items, unsigned n,
			  unsigned *free_space)
{
	return enqueue_entry(r, items, n, false, free_space);
}

/* --------------------------------------------------------------- dequeue */

/* Count (and copy) the ready items from position pos, up to n. */
static BP_ALWAYS_INLINE unsigned scan(const struct bp_ring *r, uint64_t pos,
				      void **out, unsigned n)
{
	unsigned idx = (unsigned)(pos & r->mask);
	unsigned first = r->capacity - idx;
	uintptr_t tag = lap_tag(r, pos);
	unsigned k;

	if (likely(n <= first))
		return scan_run(&r->slots[idx], out, n, tag);
	k = scan_run(&r->slots[idx], out, first, tag);
	if (k < first)
		return k;
	/* the part after the wrap belongs to the next lap */
	return first +
	       scan_run(r->slots, out ? out + first : NULL, n - first, tag ^ 1);
}

/*
 * Nothing (or, for bulk, not enough) ready at cons word ch: 0 for "not now",
 * -EPIPE when the ring is closed and can never provide `need` items.
 */
static int empty_or_eos(const struct bp_ring *r, uint64_t ch, unsigned need)
{
	uint64_t ph;

	/* relaxed: a hint; the bit itself is read below (acquire). Before
	 * the hint is seen the ring is open for this look: a sleeper's
	 * re-check after its prepare sees the hint or is woken by close,
	 * whose wakes come after both stores */
	if (likely(!atomic_load_explicit(&r->closed_hint,
					 memory_order_relaxed)))
		return 0;
	/* acquire: see the final prod.head that came with the closed bit */
	ph = atomic_load_explicit(&r->prod_head, memory_order_acquire);

	if (!(ph & CLOSED))
		return 0;
	/* reserved-but-unread items will arrive; a stale ch over-counts: retry
	 */
	return (((ph & ~CLOSED) - ch) >> 1) < need ? -EPIPE : 0;
}

int bpi_ring_ready(const struct bp_ring *r)
{
	/* acquire: as take(), no slot read may see an item older than a lap */
	uint64_t ch = atomic_load_explicit(&r->cons_head, memory_order_acquire);

	return scan(r, ch >> 1, NULL, 1) == 1 || empty_or_eos(r, ch, 1) < 0;
}

int bpi_ring_peek(const struct bp_ring *r)
{
	/* acquire: as bpi_ring_ready */
	uint64_t ch = atomic_load_explicit(&r->cons_head, memory_order_acquire);

	if (scan(r, ch >> 1, NULL, 1) == 1)
		return 1;
	return empty_or_eos(r, ch, 1) < 0 ? -1 : 0;
}

static unsigned left_after(const struct bp_ring *r, uint64_t ch)
{
	uint64_t ph = atomic_load_explicit(&r->prod_head, memory_order_relaxed);
	int64_t left = (int64_t)((ph & ~CLOSED) - ch) >> 1;

	return left > 0 ? (unsigned)left : 0;
}

/*
 * Find up to n ready items at the head and claim them (multi: CAS; single:
 * store). With out == NULL nothing is copied nor claimed (zero-copy start);
 * the caller claims later. Returns the count, 0, or -EPIPE; *chp gets the
 * cons word the items start at.
 */
static BP_ALWAYS_INLINE int take(struct bp_ring *r, void **out, unsigned n,
				 bool bulk, bool claim, uint64_t *chp)
{
	/* acquire: (3), no slot read may see an item older than a lap */
	uint64_t ch = atomic_load_explicit(&r->cons_head, memory_order_acquire);
	unsigned k;

	if (unlikely(n > r->capacity)) {
		/* bulk can never be satisfied: retrying would spin forever */
		if (bulk) {
			*chp = ch;
			return -EINVAL;
		}
		/* a scan covers at most one lap */
		n = r->capacity;
	}

	for (;;) {
		k = scan(r, ch >> 1, out, n);
		if (unlikely(k == 0 || (bulk && k < n))) {
			*chp = ch;
			return empty_or_eos(r, ch, bulk ? n : 1);
		}
		if (!claim || (r->flags & BP_RING_SC))
			break;
		/*
		 * seq_cst: release, our slot reads before any producer's
		 * overwrite (2), and the waker's side of not_full's Dekker pair
		 * (bpi_waitq_wake_after_rmw); acquire on failure: the new ch
		 * needs (3) as the load above.
		 */
		if (atomic_compare_exchange_weak_explicit(
			    &r->cons_head, &ch, ch + 2 * (uint64_t)k,
			    memory_order_seq_cst, memory_order_acquire))
			break;
	}
	if (claim && (r->flags & BP_RING_SC))
		/* release: our slot reads before any producer's overwrite (2)
		 */
		atomic_store_explicit(&r->cons_head, ch + 2 * (uint64_t)k,
				      memory_order_release);
	/* acquire: item contents written before the slots; pairs with (1) */
	batch_acquire_fence();
	*chp = ch;
	return (int)k;
}

/* wake: false only for the quiet entry point (bpi_ring_dequeue_burst_quiet) */
static BP_ALWAYS_INLINE int dequeue(struct bp_ring *r, void **items, unsigned n,
				    bool bulk, unsigned *availp, bool wake)
{
	uint64_t ch;
	int k;

	if (unlikely(n == 0 || !items)) {
		if (n && !items)
			return -EINVAL; /* *availp is not written on -EINVAL */
		if (availp)
			*availp = bp_ring_count(r);
		return 0;
	}
	k = take(r, items, n, bulk, true, &ch);
	if (availp && k != -EINVAL)
		*availp = left_after(r, ch + 2 * (uint64_t)(k > 0 ? k : 0));
	if (wake && k > 0) {
		if (r->flags & BP_RING_SC)
			bpi_waitq_wake(&r->not_full);
		else /* the claim was a seq_cst CAS */
			bpi_waitq_wake_after_rmw(&r->not_full);
	}
	return k;
}

/* The general path, out of line: the fast path's fallback. */
static __attribute__((noinline)) int dequeue_slow(struct bp_ring *r,
						  void **items, unsigned n,
						  bool bulk, unsigned *availp,
						  bool wake)
{
	return dequeue(r, items, n, bulk, availp, wake);
}

/* Nothing ready at cons word ch, out of line: 0, or -EPIPE at the end. */
static __attribute__((noinline)) int
dequeue_none(struct bp_ring *r, uint64_t ch, unsigned need, unsigned *availp)
{
	int rc = empty_or_eos(r, ch, need);

	if (availp)
		*availp = left_after(r, ch);
	return rc;
}

/*
 * The dequeue fast path (see FAST PATHS above): the run from the head does
 * not cross the end of the slot array and the claim succeeds at the first
 * try; nothing ready, or too little for a bulk, is answered here too.
 * Anything else starts over on the general path. `wide` as for
 * enqueue_fast(); `wake`: false only for bpi_ring_dequeue_burst_nowake.
 */
static BP_ALWAYS_INLINE int dequeue_fast(struct bp_ring *r, void **items,
					 unsigned n, bool bulk,
					 unsigned *availp, bool wide, bool wake)
{
	const uintptr_t *src;
	uintptr_t tag;
	uint64_t ch, pos;
	unsigned idx, k;

	if (unlikely(!items))
		return dequeue_slow(r, items, n, bulk, availp, wake);
	/* acquire: (3), no slot read may see an item older than a lap */
	ch = atomic_load_explicit(&r->cons_head, memory_order_acquire);
	pos = ch >> 1;
	idx = (unsigned)(pos & r->mask);
	/* one item always fits before the array's end (idx <= mask) */
	if (unlikely(n > 1 && idx + n > r->capacity))
		return dequeue_slow(r, items, n, bulk, availp, wake);
	tag = lap_tag(r, pos);
	src = &r->slots[idx];
	if (wide)
		k = scan_run(src, items, n, tag);
	else
		k = leaf_scan(src, items, n, tag);
	if (unlikely(k == 0 || (bulk && k < n)))
		return dequeue_none(r, ch, bulk ? n : 1, availp);
	if (r->flags & BP_RING_SC) {
		/* release: our slot reads before any producer's overwrite (2)
		 */
		atomic_store_explicit(&r->cons_head, ch + 2 * (uint64_t)k,
				      memory_order_release);
		batch_acquire_fence(); /* as below */
		if (availp)
			*availp = left_after(r, ch + 2 * (uint64_t)k);
		return wake ? wake_fast(&r->not_full, (int)k) : (int)k;
	}
	/* seq_cst: as in take(), release (2) and the wake check's barrier;
	 * relaxed on failure: we start over */
	if (unlikely(!atomic_compare_exchange_strong_explicit(
		    &r->cons_head, &ch, ch + 2 * (uint64_t)k,
		    memory_order_seq_cst, memory_order_relaxed)))
		return dequeue_slow(r, items, n, bulk, availp, wake);
	/* acquire: item contents written before the slots; pairs with (1) */
	batch_acquire_fence();
	if (availp)
		*availp = left_after(r, ch + 2 * (uint64_t)k);
	if (wake)
		bpi_waitq_wake_after_rmw(&r->not_full);
	return (int)k;
}

static __attribute__((noinline)) int dequeue_wide(struct bp_ring *r,
						  void **items, unsigned n,
						  bool bulk, unsigned *availp)
{
	/* 0 and oversized batches: as enqueue_wide() */
	if (unlikely(n - 1u >= r->capacity))
		return dequeue_slow(r, items, n, bulk, availp, true);
	return dequeue_fast(r, items, n, bulk, availp, true, true);
}

static __attribute__((noinline)) int
dequeue_wide_nowake(struct bp_ring *r, void **items, unsigned n)
{
	/* 0 and oversized batches: as enqueue_wide() */
	if (unlikely(n - 1u >= r->capacity))
		return dequeue_slow(r, items, n, false, NULL, false);
	return dequeue_fast(r, items, n, false, NULL, true, false);
}

/* As enqueue_one(). */
static __attribute__((noinline)) int dequeue_one(struct bp_ring *r,
						 void **items, bool bulk,
						 unsigned *availp)
{
	return dequeue_fast(r, items, 1, bulk, availp, false, true);
}

/* As enqueue_entry(). */
static BP_ALWAYS_INLINE int dequeue_entry(struct bp_ring *r, void **items,
					  unsigned n, bool bulk,
					  unsigned *availp)
{
	if (n == 1)
		return dequeue_one(r, items, bulk, availp);
	if (n - 1u < LEAF_MAX)
		return dequeue_fast(r, items, n, bulk, availp, false, true);
	return dequeue_wide(r, items, n, bulk, availp);
}

int bp_ring_dequeue_bulk(struct bp_ring *r, void **items, unsigned n,
			 unsigned *available)
{
	return dequeue_entry(r, items, n, true, available);
}

int bp_ring_dequeue_burst(struct bp_ring *r, void **items, unsigned n,
			  unsigned *available)
{
	return dequeue_entry(r, items, n, false, available);
}

/* -------------------------------------------------------------- blocking */

struct op {
	struct bp_ring *r;
	void **items;
	unsigned n;
	bool bulk;
};

static int try_enqueue(void *arg)
{
	struct op *op = arg;

	return enqueue(op->r, op->items, op->n, op->bulk, NULL);
}

static int try_dequeue(void *arg)
{
	struct op *op = arg;

	return dequeue(op->r, op->items, op->n, op->bulk, NULL, true);
}

static void policy_of(const struct bp_ring *r, struct bp_wait_policy *p)
{
	/* relaxed: a policy change may take effect one wait late */
	p->strategy =
		atomic_load_explicit(&r->wait_strategy, memory_order_relaxed);
	p->spin_ns =
		atomic_load_explicit(&r->wait_spin_ns, memory_order_relaxed);
	p->yields = atomic_load_explicit(&r->wait_yields, memory_order_relaxed);
}

static int wait_op(struct bp_ring *r, void **items, unsigned n, bool bulk,
		   bool enq, int64_t timeout_ns)
{
	struct op op = {r, items, n, bulk};
	struct bp_wait_policy pol;
	int rc;

	if (n == 0)
		return 0;
	if (!items || (bulk && n > r->capacity))
		return -EINVAL;
	if (r->flags & BPI_RING_QUIET)
		return -EOPNOTSUPP; /* nobody would wake us */
	rc = enq ? try_enqueue(&op) : try_dequeue(&op);
	if (rc != 0)
		return rc;
	if (timeout_ns == 0)
		return -ETIMEDOUT;
	policy_of(r, &pol);
	return bpi_wait_loop(&pol, enq ? &r->not_full : &r->not_empty,
			     enq ? try_enqueue : try_dequeue, &op, timeout_ns);
}

int bp_ring_enqueue_bulk_wait(struct bp_ring *r, void *const *items, unsigned n,
			      int64_t timeout_ns)
{
	return wait_op(r, (void **)items, n, true, true, timeout_ns);
}

int bp_ring_enqueue_burst_wait(struct bp_ring *r, void *const *items,
			       unsigned n, int64_t timeout_ns)
{
	return wait_op(r, (void **)items, n, false, true, timeout_ns);
}

int bp_ring_dequeue_bulk_wait(struct bp_ring *r, void **items, unsigned n,
			      int64_t timeout_ns)
{
	return wait_op(r, items, n, true, false, timeout_ns);
}

int bp_ring_dequeue_burst_wait(struct bp_ring *r, void **items, unsigned n,
			       int64_t timeout_ns)
{
	return wait_op(r, items, n, false, false, timeout_ns);
}

int bp_ring_set_wait_policy(struct bp_ring *r, const struct bp_wait_policy *p)
{
	if (!r || bp_wait_policy_check(p) != 0)
		return -EINVAL;
	atomic_store_explicit(&r->wait_strategy, p->strategy,
			      memory_order_relaxed);
	atomic_store_explicit(&r->wait_spin_ns, p->spin_ns,
			      memory_order_relaxed);
	atomic_store_explicit(&r->wait_yields, p->yields, memory_order_relaxed);
	return 0;
}

/* ----------------------------------------------------------- close, count */

int bp_ring_close(struct bp_ring *r)
{
	/*
	 * The hint first: whoever sees the bit (an acquire load of prod.head,
	 * which the release OR below synchronizes with) sees the hint too,
	 * so a consumer never finds a ring closed by its bit and yet not at
	 * its end by the hint. A hint without the bit yet is only a look at
	 * prod.head that finds it open. relaxed: ordered by the OR's release.
	 */
	atomic_store_explicit(&r->closed_hint, 1, memory_order_relaxed);
	/* release: a consumer that sees the bit sees the final position */
	atomic_fetch_or_explicit(&r->prod_head, CLOSED, memory_order_release);
	bpi_waitq_wake_all_slow(&r->not_empty);
	bpi_waitq_wake_all_slow(&r->not_full);
	return 0;
}

int bp_ring_is_closed(const struct bp_ring *r)
{
	/* acquire: pairs with close's release OR, so that a caller that sees
	 * the bit and then dequeues finds closed_hint set (empty_or_eos) */
	return (int)(atomic_load_explicit(&r->prod_head, memory_order_acquire) &
		     CLOSED);
}

unsigned bp_ring_count(const struct bp_ring *r)
{
	/* acquire/relaxed snapshot: cons first, so prod >= cons in theory */
	uint64_t ch = atomic_load_explicit(&r->cons_head, memory_order_acquire);
	uint64_t ph = atomic_load_explicit(&r->prod_head, memory_order_relaxed);
	int64_t used = (int64_t)((ph & ~CLOSED) - ch) >> 1;

	if (used < 0)
		return 0;
	return used > r->capacity ? r->capacity : (unsigned)used;
}

unsigned bp_ring_free_count(const struct bp_ring *r)
{
	return r->capacity - bp_ring_count(r);
}

long bp_ring_high_water(const struct bp_ring *r)
{
	if (!(r->flags & BP_RING_HWM))
		return -EOPNOTSUPP;
	return (long)atomic_load_explicit(&r->hwm, memory_order_relaxed);
}

/* ------------------------------------------------------------- zero-copy */

static void zc_describe(const struct bp_ring *r, uint64_t pos, unsigned k,
			struct bp_ring_zc *zc)
{
	unsigned idx = (unsigned)(pos & r->mask);
	unsigned first = r->capacity - idx;

	if (first > k)
		first = k;
	zc->slot[0] = &r->slots[idx];
	zc->n[0] = first;
	zc->lap[0] = lap_tag(r, pos);
	zc->slot[1] = r->slots;
	zc->n[1] = k - first;
	zc->lap[1] = zc->lap[0] ^ 1;
	zc->count = k;
	zc->put = 0;
	zc->pos = pos;
}

static int enq_zc_start(struct bp_ring *r, unsigned n, bool bulk,
			struct bp_ring_zc *zc)
{
	uint64_t pos;
	int k;

	if (!zc)
		return -EINVAL;
	zc->count = 0;
	zc->put = 0;
	if (n == 0)
		return 0;
	if (bulk && n > r->capacity)
		return -EINVAL; /* could never be reserved */
	k = reserve(r, n, bulk, &pos, NULL);
	if (k > 0)
		zc_describe(r, pos, (unsigned)k, zc);
	return k;
}

int bp_ring_enqueue_zc_bulk_start(struct bp_ring *r, unsigned n,
				  struct bp_ring_zc *zc)
{
	return enq_zc_start(r, n, true, zc);
}

int bp_ring_enqueue_zc_burst_start(struct bp_ring *r, unsigned n,
				   struct bp_ring_zc *zc)
{
	return enq_zc_start(r, n, false, zc);
}

int bp_ring_enqueue_zc_finish(struct bp_ring *r, struct bp_ring_zc *zc)
{
	if (!zc || zc->put != zc->count)
		return -EINVAL;
	if (zc->count == 0)
		return 0;
	if (r->flags & BP_RING_HWM)
		note_high_water(r, zc->pos, zc->count);
	bpi_waitq_wake(&r->not_empty);
	zc->count = 0;
	zc->put = 0;
	return 0;
}

static int deq_zc_start(struct bp_ring *r, unsigned n, bool bulk,
			struct bp_ring_zc *zc)
{
	uint64_t ch;
	int k;

	if (!zc)
		return -EINVAL;
	if (!(r->flags & BP_RING_SC))
		return -EOPNOTSUPP;
	zc->count = 0;
	if (n == 0)
		return 0;
	k = take(r, NULL, n, bulk, false, &ch);
	if (k > 0)
		zc_describe(r, ch >> 1, (unsigned)k, zc);
	return k;
}

int bp_ring_dequeue_zc_bulk_start(struct bp_ring *r, unsigned n,
				  struct bp_ring_zc *zc)
{
	return deq_zc_start(r, n, true, zc);
}

int bp_ring_dequeue_zc_burst_start(struct bp_ring *r, unsigned n,
				   struct bp_ring_zc *zc)
{
	return deq_zc_start(r, n, false, zc);
}

int bp_ring_dequeue_zc_finish(struct bp_ring *r, struct bp_ring_zc *zc,
			      unsigned m)
{
	if (!zc || m > zc->count)
		return -EINVAL;
	if (!(r->flags & BP_RING_SC))
		return -EOPNOTSUPP;
	if (m == 0)
		return 0;
	/* release: our in-place reads before any producer's overwrite (2) */
	atomic_store_explicit(&r->cons_head, (zc->pos + m) << 1,
			      memory_order_release);
	bpi_waitq_wake(&r->not_full);
	zc->count = 0;
	return 0;
}

struct bpi_waitq *bpi_ring_not_empty(struct bp_ring *r)
{
	return &r->not_empty;
}

struct bpi_waitq *bpi_ring_not_full(struct bp_ring *r)
{
	return &r->not_full;
}

uint64_t bpi_ring_enqueued(const struct bp_ring *r)
{
	/* relaxed: a snapshot */
	uint64_t ph = atomic_load_explicit(&r->prod_head, memory_order_relaxed);

	return ((ph >> 1) - r->start) & (BPI_RING_POS_SPACE - 1);
}

uint64_t bpi_ring_dequeued(const struct bp_ring *r)
{
	/* relaxed: a snapshot */
	uint64_t ch = atomic_load_explicit(&r->cons_head, memory_order_relaxed);

	return ((ch >> 1) - r->start) & (BPI_RING_POS_SPACE - 1);
}

uint64_t bpi_ring_reserved_pos(const struct bp_ring *r, uint64_t *count)
{
	/* relaxed: see ring_internal.h */
	uint64_t pos = (atomic_load_explicit(&r->prod_head,
					     memory_order_relaxed) >>
			1) &
		       (BPI_RING_POS_SPACE - 1);

	*count = (pos - r->start) & (BPI_RING_POS_SPACE - 1);
	return pos;
}

static __attribute__((noinline)) int reserve_slow(struct bp_ring *r, unsigned n,
						  uint64_t *pos)
{
	return n ? reserve(r, n, false, pos, NULL) : 0;
}

/*
 * No room by the cached position (and intake open): is the ring full by
 * the consumers' own position too? A worker whose egress the sink has not
 * emptied asks on every pass; the answer then costs a load, not the
 * general path. ph may be stale (another producer moved on): that only
 * understates the count, so "full" is never said of a ring with room.
 */
static inline bool still_full(struct bp_ring *r, uint64_t ph)
{
	/* acquire: as in reserve(), pairs with consumers' release (2) */
	uint64_t ch = atomic_load_explicit(&r->cons_head, memory_order_acquire);

	return (int64_t)(ph - ch) >> 1 >= (int64_t)r->capacity;
}

/* As enqueue_fast()'s claim: all n fit by the cached position, one try. */
int bpi_ring_reserve_burst(struct bp_ring *r, unsigned n, uint64_t *pos)
{
	uint64_t ph, ch;
	int64_t room;

	if (unlikely(n - 1u >= r->capacity))
		return reserve_slow(r, n, pos);
	/* relaxed and acquire: as in reserve() */
	ph = atomic_load_explicit(&r->prod_head, memory_order_relaxed);
	ch = atomic_load_explicit(&r->prod_cons_cache, memory_order_acquire);
	room = (int64_t)r->capacity - ((int64_t)(ph - ch) >> 1);
	if (unlikely((ph & CLOSED) || room < (int64_t)n)) {
		if (!(ph & CLOSED) && room <= 0 && still_full(r, ph))
			return 0;
		return reserve_slow(r, n, pos);
	}
	if (unlikely(!claim_once(r, ph, n)))
		return reserve_slow(r, n, pos);
	*pos = ph >> 1;
	return (int)n;
}

void bpi_ring_publish(struct bp_ring *r, uint64_t pos, void *const *items,
		      unsigned k)
{
	publish(r, pos, items, k);
	if (r->flags & BP_RING_HWM)
		note_high_water(r, pos, k);
	bpi_waitq_wake(&r->not_empty);
}

void bpi_ring_publish_quiet(struct bp_ring *r, uint64_t pos, void *const *items,
			    unsigned k)
{
	publish(r, pos, items, k);
	if (r->flags & BP_RING_HWM)
		note_high_water(r, pos, k);
}

/* publish() and the high-water mark of one item */
static BP_ALWAYS_INLINE void publish_one(struct bp_ring *r, uint64_t pos,
					 void *item)
{
	/* release: item contents before the slot store; pairs with (1) */
	batch_release_fence();
	__atomic_store_n(&r->slots[pos & r->mask],
			 (uintptr_t)item | lap_tag(r, pos), SLOT_STORE);
	if (r->flags & BP_RING_HWM)
		note_high_water(r, pos, 1);
}

void bpi_ring_publish_one(struct bp_ring *r, uint64_t pos, void *item)
{
	publish_one(r, pos, item);
	bpi_waitq_wake(&r->not_empty);
}

void bpi_ring_publish_one_quiet(struct bp_ring *r, uint64_t pos, void *item)
{
	publish_one(r, pos, item);
}

int bpi_ring_dequeue_burst_quiet(struct bp_ring *r, void **items, unsigned n)
{
	return dequeue(r, items, n, false, NULL, false);
}

/* As dequeue_one(), without the wake check. */
static __attribute__((noinline)) int dequeue_one_nowake(struct bp_ring *r,
							void **items)
{
	return dequeue_fast(r, items, 1, false, NULL, false, false);
}

int bpi_ring_dequeue_burst_nowake(struct bp_ring *r, void **items, unsigned n)
{
	if (n == 1)
		return dequeue_one_nowake(r, items);
	if (n - 1u < LEAF_MAX)
		return dequeue_fast(r, items, n, false, NULL, false, false);
	return dequeue_wide_nowake(r, items, n);
}
