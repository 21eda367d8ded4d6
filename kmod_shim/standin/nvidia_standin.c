// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia_standin.c: a stand-in for the NVIDIA open kernel module's entry points.
 *
 * It has the symbols rmtrace.ko's default probe list names, with the real
 * argument shapes (facts read from open-gpu-kernel-modules 580.142), so the
 * probes attach here exactly as they would to nvidia.ko and nvidia-uvm.ko:
 *
 *   nvidia_unlocked_ioctl(file, cmd, arg)         /dev/nvidiactl's ioctl
 *   uvm_ioctl(filp, cmd, arg)                      behind /dev/nvidia-uvm's ioctl
 *   nvUvmInterfaceRegisterGpu(uuid, platformInfo)  nvUvmInterfaceUnregisterGpu(uuid)
 *   nvUvmInterfaceRetainChannel(vaSpace, hClient, hChannel, &retained, info)
 *   GspMsgQueueSendCommand(pMQI, pGpu)             GspMsgQueueReceiveStatus(pMQI, pGpu)
 *
 * and a little behaviour, so a test sees the calls nest as in the real
 * stack: an RM_CONTROL goes to the "GSP" as a GSP_RM_CONTROL RPC through
 * the message queue functions (a 48-byte queue element, checksum and
 * sequence number as the real queue has them) and its params come back
 * changed; UVM_REGISTER_GPU calls RegisterGpu and RetainChannel; with
 * wedge=1, UVM_UNREGISTER_GPU's call to UnregisterGpu blocks until
 * release=1 is written (or the module unloads): the bug report's wedge.
 */
#include <linux/completion.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#define RM_CONTROL       0x2a
#define UVM_INITIALIZE   0x30000001u
#define UVM_REGISTER_GPU 37
#define UVM_UNREGISTER_GPU 38
#define GSP_RM_CONTROL   76
#define ELEMENT_PREFIX   48
#define RPC_HEADER       32
#define RPC_CONTROL_FIXED 40
#define MAX_PARAMS       4096

struct rpc_header {
	u32 header_version, signature, length, function, rpc_result, rpc_result_private, sequence, spare;
};

/* MESSAGE_QUEUE_INFO up to pCmdQueueElement, 535-590 layout: the element pointer is at 48. */
struct mq_info {
	u64 commandQueueSize, statusQueueSize;
	void *pCommandQueue, *pStatusQueue, *pRpcMsgBuf, *pWorkArea;
	u8 *pCmdQueueElement;
	void *pMetaData;
	u32 txSeqNum, rxSeqNum;
};

struct nvos54 {
	u32 hClient, hObject, cmd, flags;
	u64 params;
	u32 paramsSize, status;
};

struct uvm_register_gpu {
	u8 uuid[16];
	u32 numaEnabled, numaNodeId, rmCtrlFd, hClient, hSmcPartRef, rmStatus;
};

/* The real driver declares these in its headers (nv_uvm_interface.h, message_queue.h). */
struct mq_info;
int GspMsgQueueSendCommand(struct mq_info *pMQI, void *pGpu);
int GspMsgQueueReceiveStatus(struct mq_info *pMQI, void *pGpu);
long nvidia_unlocked_ioctl(struct file *file, unsigned int cmd, unsigned long arg);
long uvm_ioctl(struct file *filp, unsigned int cmd, unsigned long arg);
u32 nvUvmInterfaceRegisterGpu(const u8 *gpuUuid, void *gpuInfo);
void nvUvmInterfaceUnregisterGpu(const u8 *gpuUuid);
u32 nvUvmInterfaceRetainChannel(void *vaSpace, u32 hClient, u32 hChannel, void **retainedChannel,
				void *channelInstanceInfo);

static bool wedge;
module_param(wedge, bool, 0644);
MODULE_PARM_DESC(wedge, "UVM_UNREGISTER_GPU blocks in nvUvmInterfaceUnregisterGpu until release");

static DECLARE_COMPLETION(unblock);
static int release_set(const char *val, const struct kernel_param *kp)
{
	complete_all(&unblock);
	return 0;
}
static const struct kernel_param_ops release_ops = { .set = release_set };
module_param_cb(release, &release_ops, NULL, 0200);
MODULE_PARM_DESC(release, "write anything: every blocked call returns");

static DEFINE_MUTEX(gsp_lock);
static struct mq_info mq;
static u32 rpc_sequence;

static u32 checksum(const u8 *p, u32 len)
{
	u64 sum = 0;
	u32 i;

	for (i = 0; i < len; i += 8) {
		u64 w = 0;

		memcpy(&w, p + i, min(8u, len - i));
		sum ^= w;
	}
	return (u32)(sum >> 32) ^ (u32)sum;
}

noinline int GspMsgQueueSendCommand(struct mq_info *pMQI, void *pGpu)
{
	u8 *e = pMQI->pCmdQueueElement;
	const struct rpc_header *rpc = (const void *)(e + ELEMENT_PREFIX);
	u32 size = ELEMENT_PREFIX + rpc->length;

	*(u32 *)(e + 36) = pMQI->txSeqNum++;              /* seqNum */
	*(u32 *)(e + 40) = DIV_ROUND_UP(size, 4096);      /* elemCount */
	*(u32 *)(e + 32) = 0;
	*(u32 *)(e + 32) = checksum(e, size);              /* checkSum: the XOR folds to 0 */
	return 0;
}

noinline int GspMsgQueueReceiveStatus(struct mq_info *pMQI, void *pGpu)
{
	u8 *e = pMQI->pCmdQueueElement;
	struct rpc_header *rpc = (void *)(e + ELEMENT_PREFIX);
	u8 *params = e + ELEMENT_PREFIX + RPC_HEADER + RPC_CONTROL_FIXED;
	u32 n = rpc->length - RPC_HEADER - RPC_CONTROL_FIXED, i, size;

	/* the "GSP" answers: NV_OK, and every params byte plus one */
	for (i = 0; i < n; i++)
		params[i]++;
	rpc->rpc_result = 0;
	rpc->rpc_result_private = 0;
	size = ELEMENT_PREFIX + rpc->length;
	*(u32 *)(e + 36) = pMQI->rxSeqNum++;
	*(u32 *)(e + 32) = 0;
	*(u32 *)(e + 32) = checksum(e, size);
	return 0;
}

/* One GSP_RM_CONTROL exchange over the stand-in queue: the params travel there and back. */
static int rm_control_rpc(struct nvos54 *ctl, u8 *params)
{
	u8 *e = mq.pCmdQueueElement;
	struct rpc_header *rpc = (void *)(e + ELEMENT_PREFIX);
	u32 *fixed = (u32 *)(e + ELEMENT_PREFIX + RPC_HEADER);

	mutex_lock(&gsp_lock);
	memset(e, 0, ELEMENT_PREFIX + RPC_HEADER + RPC_CONTROL_FIXED + MAX_PARAMS);
	*rpc = (struct rpc_header){ .header_version = 0x03000000, .signature = 0x43505256,
				    .length = RPC_HEADER + RPC_CONTROL_FIXED + ctl->paramsSize,
				    .function = GSP_RM_CONTROL, .rpc_result = 0xffffffff,
				    .rpc_result_private = 0xffffffff, .sequence = ++rpc_sequence };
	fixed[0] = ctl->hClient;
	fixed[1] = ctl->hObject;
	fixed[2] = ctl->cmd;
	fixed[4] = ctl->paramsSize;
	memcpy(e + ELEMENT_PREFIX + RPC_HEADER + RPC_CONTROL_FIXED, params, ctl->paramsSize);
	GspMsgQueueSendCommand(&mq, NULL);
	GspMsgQueueReceiveStatus(&mq, NULL);
	memcpy(params, e + ELEMENT_PREFIX + RPC_HEADER + RPC_CONTROL_FIXED, ctl->paramsSize);
	ctl->status = rpc->rpc_result;
	mutex_unlock(&gsp_lock);
	return 0;
}

noinline long nvidia_unlocked_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct nvos54 ctl;
	u8 *params;
	int rc = 0;

	if (_IOC_NR(cmd) != RM_CONTROL || _IOC_SIZE(cmd) != sizeof(ctl))
		return -EINVAL;
	if (copy_from_user(&ctl, (void __user *)arg, sizeof(ctl)))
		return -EFAULT;
	if (ctl.paramsSize > MAX_PARAMS)
		return -EINVAL;
	params = kmalloc(MAX_PARAMS, GFP_KERNEL);
	if (!params)
		return -ENOMEM;
	if (copy_from_user(params, u64_to_user_ptr(ctl.params), ctl.paramsSize))
		rc = -EFAULT;
	else
		rm_control_rpc(&ctl, params);
	if (!rc && (copy_to_user(u64_to_user_ptr(ctl.params), params, ctl.paramsSize) ||
		    copy_to_user((void __user *)arg, &ctl, sizeof(ctl))))
		rc = -EFAULT;
	kfree(params);
	return rc;
}

noinline u32 nvUvmInterfaceRegisterGpu(const u8 *gpuUuid, void *gpuInfo)
{
	memset(gpuInfo, 0, 16);
	return gpuUuid[0] == 0xff ? 0x56 /* NV_ERR_GPU_UUID_NOT_FOUND */ : 0;
}
EXPORT_SYMBOL_GPL(nvUvmInterfaceRegisterGpu);

noinline void nvUvmInterfaceUnregisterGpu(const u8 *gpuUuid)
{
	if (READ_ONCE(wedge))
		wait_for_completion_killable(&unblock); /* the host never completes the exchange */
}
EXPORT_SYMBOL_GPL(nvUvmInterfaceUnregisterGpu);

noinline u32 nvUvmInterfaceRetainChannel(void *vaSpace, u32 hClient, u32 hChannel, void **retainedChannel,
					 void *channelInstanceInfo)
{
	*retainedChannel = (void *)(unsigned long)(0xc4a70000u | (hChannel & 0xffff));
	return 0;
}
EXPORT_SYMBOL_GPL(nvUvmInterfaceRetainChannel);

noinline long uvm_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct uvm_register_gpu p;
	void *retained;
	u8 info[16];

	switch (cmd) {
	case UVM_INITIALIZE:
		return put_user(0u, (u32 __user *)(arg + 8)) ? -EFAULT : 0;
	case UVM_REGISTER_GPU:
	case UVM_UNREGISTER_GPU:
		if (copy_from_user(&p, (void __user *)arg, cmd == UVM_REGISTER_GPU ? sizeof(p) : 16))
			return -EFAULT;
		if (cmd == UVM_UNREGISTER_GPU) {
			nvUvmInterfaceUnregisterGpu(p.uuid);
			return put_user(0u, (u32 __user *)(arg + 16)) ? -EFAULT : 0;
		}
		p.rmStatus = nvUvmInterfaceRegisterGpu(p.uuid, info);
		if (!p.rmStatus)
			p.rmStatus = nvUvmInterfaceRetainChannel(NULL, p.hClient, 0xcaf000d4, &retained, info);
		return copy_to_user((void __user *)arg, &p, sizeof(p)) ? -EFAULT : 0;
	}
	return -EINVAL;
}

static long uvm_unlocked_ioctl_entry(struct file *filp, unsigned int cmd, unsigned long arg)
{
	return uvm_ioctl(filp, cmd, arg);
}

static const struct file_operations ctl_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = nvidia_unlocked_ioctl,
};

static const struct file_operations uvm_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = uvm_unlocked_ioctl_entry,
};

static struct miscdevice ctl_dev = { .minor = MISC_DYNAMIC_MINOR, .name = "nvidiactl", .fops = &ctl_fops,
				     .mode = 0666 };
static struct miscdevice uvm_dev = { .minor = MISC_DYNAMIC_MINOR, .name = "nvidia-uvm", .fops = &uvm_fops,
				     .mode = 0666 };

static int __init standin_init(void)
{
	int rc;

	mq.pWorkArea = kzalloc(ELEMENT_PREFIX + RPC_HEADER + RPC_CONTROL_FIXED + MAX_PARAMS + 8, GFP_KERNEL);
	if (!mq.pWorkArea)
		return -ENOMEM;
	mq.pCmdQueueElement = mq.pWorkArea;
	rc = misc_register(&ctl_dev);
	if (rc)
		goto free;
	rc = misc_register(&uvm_dev);
	if (rc)
		goto ctl;
	return 0;
ctl:
	misc_deregister(&ctl_dev);
free:
	kfree(mq.pWorkArea);
	return rc;
}

static void __exit standin_exit(void)
{
	complete_all(&unblock);
	misc_deregister(&uvm_dev);
	misc_deregister(&ctl_dev);
	kfree(mq.pWorkArea);
}

module_init(standin_init);
module_exit(standin_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("rmtrace test stand-in for the NVIDIA open kernel module's entry points");
