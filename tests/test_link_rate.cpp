#include <gtest/gtest.h>

#include "probes/topo/link_rate.hpp"

using namespace commtool::topo;

TEST(LinkRate, Gen5x16RawIs63GBPerDirection) {
  EXPECT_NEAR(pcie_raw_gbps(5, 16), 63.02, 0.01);
}

TEST(LinkRate, Gen3x16RawIs15_75GB) {
  EXPECT_NEAR(pcie_raw_gbps(3, 16), 15.75, 0.01);
}

TEST(LinkRate, Gen2Uses8b10bEncoding) {
  EXPECT_NEAR(pcie_raw_gbps(2, 16), 8.0, 1e-9);
}

TEST(LinkRate, PayloadRemovesTlpOverheadAtMps256) {
  EXPECT_NEAR(pcie_payload_gbps(5, 16), 63.015 * 256.0 / 282.0, 0.01);
  EXPECT_LT(pcie_payload_gbps(5, 16, 128), pcie_payload_gbps(5, 16, 256));
}

TEST(LinkRate, UnknownGenerationOrWidthGivesZero) {
  EXPECT_EQ(pcie_raw_gbps(0, 16), 0.0);
  EXPECT_EQ(pcie_raw_gbps(5, 0), 0.0);
  EXPECT_EQ(pcie_raw_gbps(7, 16), 0.0);
}

TEST(LinkRate, SysfsSpeedStringsMapToGenerations) {
  EXPECT_EQ(pcie_gen_from_speed("2.5 GT/s PCIe"), 1);
  EXPECT_EQ(pcie_gen_from_speed("5.0 GT/s PCIe"), 2);
  EXPECT_EQ(pcie_gen_from_speed("8.0 GT/s PCIe"), 3);
  EXPECT_EQ(pcie_gen_from_speed("16.0 GT/s PCIe"), 4);
  EXPECT_EQ(pcie_gen_from_speed("32.0 GT/s PCIe"), 5);
  EXPECT_EQ(pcie_gen_from_speed("64.0 GT/s PCIe"), 6);
  EXPECT_EQ(pcie_gen_from_speed("8 GT/s"), 3);
}

TEST(LinkRate, UnknownSpeedIsZeroAndGarbageIsMinusOne) {
  EXPECT_EQ(pcie_gen_from_speed("Unknown"), 0);
  EXPECT_EQ(pcie_gen_from_speed(""), 0);
  EXPECT_EQ(pcie_gen_from_speed("fast"), -1);
  EXPECT_EQ(pcie_gen_from_speed("12.0 GT/s"), -1);
  EXPECT_EQ(pcie_gen_from_speed("16.0 Gb/s"), -1);
}

TEST(LinkRate, NvLink4Has25GBPerLinkSo18LinksGive450) {
  EXPECT_EQ(nvlink_generation_for_sm(90), 4);
  EXPECT_DOUBLE_EQ(18 * nvlink_link_gbps(4), 450.0);
}

TEST(LinkRate, NvLinkGenerationFollowsArchitecture) {
  EXPECT_EQ(nvlink_generation_for_sm(60), 1);
  EXPECT_EQ(nvlink_generation_for_sm(70), 2);
  EXPECT_EQ(nvlink_generation_for_sm(80), 3);
  EXPECT_EQ(nvlink_generation_for_sm(100), 5);
  EXPECT_EQ(nvlink_generation_for_sm(52), 0);
  EXPECT_DOUBLE_EQ(nvlink_link_gbps(5), 50.0);
}
