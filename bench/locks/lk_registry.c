/* SPDX-License-Identifier: MIT */
/* lk_registry.c - the variants `bpbench locks` knows, by name. */
#include <string.h>

#include "locks/locks.h"

const struct lk_variant *const lk_variants[] = {
	&lk_mutex,
	&lk_mutex_batched,
	&lk_tas,
	&lk_pthread_spin,
	&lk_ck_ticket,
	&lk_ck_mcs,
	&lk_ck_ring,
	&lk_urcu_wfcq,
	&lk_batchpipe_ring,
	&lk_plain_lockfree, /* not batchpipe's: the same step by hand */
	&lk_batchpipe_pipeline,
	NULL,
};

const struct lk_variant *lk_variant_find(const char *name)
{
	for (int i = 0; lk_variants[i]; i++)
		if (!strcmp(lk_variants[i]->name, name))
			return lk_variants[i];
	return NULL;
}
