/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rmtrace_sample.h: the sample target's own RMT_REPLAY_TARGET body.
 *
 * The replayer (replayer/targets/kmod.py, SampleGspTemplate, checked against
 * this header's DWARF by tests/kernel/test_kmod_abi.py) sends one TARGET
 * record per RPC of the registration exchange: this body in the ARG buffer
 * after struct rmt_replay_ctl, then the RPC as the in-process model builds
 * it from the trace's driver profile in a PAYLOAD buffer.  The sample stamps
 * its sequence number and results into a copy at the offsets given here.
 */
#ifndef RMTRACE_SAMPLE_H
#define RMTRACE_SAMPLE_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

#define RMT_SAMPLE_GSP_TEMPLATE 1

struct rmt_sample_gsp_template {
	uint32_t kind;               /* RMT_SAMPLE_GSP_TEMPLATE                                   */
	uint32_t index;              /* 0..5: UVM's objects in the registration exchange; 6: its FREE */
	uint32_t function;           /* the RPC's function number                                 */
	uint32_t seq_off;            /* offsets in the RPC of rpc_message_header's sequence,       */
	uint32_t result_off;         /* rpc_result                                                */
	uint32_t result_private_off; /* and rpc_result_private                                    */
};

#endif /* RMTRACE_SAMPLE_H */
