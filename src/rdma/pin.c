/* SPDX-License-Identifier: MIT */
/*
 * Rail-local pinning: on a many-NIC node, running each thread on CPUs near
 * its NIC avoids crossing the socket interconnect on every completion and
 * every DMA descriptor. The provider names the NIC's PCI address (fi_nic bus
 * attributes); sysfs says which CPUs are local to it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/rdma/rdma_internal.h"

/* Parse a cpulist ("0-3,8,10-11") into set; returns the count. */
static int parse_cpulist(const char *s, cpu_set_t *set)
{
	int n = 0;

	CPU_ZERO(set);
	while (*s && *s != '\n') {
		char *end;
		long a = strtol(s, &end, 10), b = a;

		if (end == s || a < 0)
			return -EINVAL;
		if (*end == '-') {
			s = end + 1;
			b = strtol(s, &end, 10);
			if (end == s || b < a)
				return -EINVAL;
		}
		for (long c = a; c <= b && c < CPU_SETSIZE; c++, n++)
			CPU_SET((int)c, set);
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

/* The CPUs local to the NIC behind info, or 0 where it has none. */
static int nic_cpus(const struct fi_info *info, cpu_set_t *set, char *where,
		    size_t wlen)
{
	const struct fi_pci_attr *pci;
	char path[128], line[4096];
	FILE *f;
	int n;

	if (!info->nic || !info->nic->bus_attr ||
	    info->nic->bus_attr->bus_type != FI_BUS_PCI)
		return 0;
	pci = &info->nic->bus_attr->attr.pci;
	snprintf(where, wlen, "%04x:%02x:%02x.%x", pci->domain_id, pci->bus_id,
		 pci->device_id, pci->function_id);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/local_cpulist",
		 where);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fgets(line, sizeof(line), f) ? parse_cpulist(line, set) : 0;
	fclose(f);
	return n > 0 ? n : 0;
}

void bpi_pin_rail_local(const struct fi_info *info, unsigned worker,
			const int *fallback, unsigned nfallback,
			const struct bpi_logger *l)
{
	char where[32] = "";
	cpu_set_t set;
	int rc;

	if (nic_cpus(info, &set, where, sizeof(where)) > 0) {
		rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
		if (rc == 0) {
			bpi_log(l, BP_LOG_INFO,
				"worker %u: pinned to the CPUs local to NIC %s",
				worker, where);
			return;
		}
		bpi_log(l, BP_LOG_WARN, "worker %u: pinning near NIC %s: %s",
			worker, where, strerror(rc));
	}
	if (!nfallback) {
		bpi_log(l, BP_LOG_INFO,
			"worker %u: no NIC with local CPUs (provider %s) and "
			"no "
			"fallback CPUs: not pinned",
			worker, info->fabric_attr->prov_name);
		return;
	}
	CPU_ZERO(&set);
	CPU_SET(fallback[worker % nfallback], &set);
	rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	bpi_log(l, rc ? BP_LOG_WARN : BP_LOG_INFO,
		"worker %u: no NIC with local CPUs (provider %s): %s CPU "
		"%d%s%s",
		worker, info->fabric_attr->prov_name,
		rc ? "could not pin to fallback" : "pinned to fallback",
		fallback[worker % nfallback], rc ? ": " : "",
		rc ? strerror(rc) : "");
}
