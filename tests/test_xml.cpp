// The XML reader NCCL topology files go through: what it accepts, and that every malformed
// input fails as bad input (exit code 2) with the line and what was expected.
#include "probes/topo/xml.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "probes/base/error.hpp"

namespace commtool::topo::xml {
namespace {

// The error parse() throws for `text`, read as "topo.xml".
Error parse_error(std::string_view text) {
  try {
    parse(text, "topo.xml");
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "parse accepted:\n" << text;
  return Error(ExitCode::kOk, "");
}

std::string nested(int depth) {
  std::string text;
  for (int i = 0; i < depth; ++i)
    text += "<a>";
  for (int i = 0; i < depth; ++i)
    text += "</a>";
  return text;
}

TEST(XmlParse, AcceptsDeclarationCommentsAndSelfClosingTags) {
  Element root = parse(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<!-- dumped by NCCL -->\n"
      "<system version=\"1\">\n"
      "  <!-- between elements -->\n"
      "  <cpu numaid=\"0\"/>\n"
      "</system>\n"
      "<!-- after the root -->\n",
      "topo.xml");
  EXPECT_EQ(root.name, "system");
  ASSERT_EQ(root.children.size(), 1u);
  EXPECT_EQ(root.children[0].name, "cpu");
  EXPECT_TRUE(root.children[0].children.empty());
}

TEST(XmlParse, RecordsTheLineEachElementStartsOn) {
  Element root = parse("\n<system>\n  <cpu>\n\n    <pci/>\n  </cpu>\n</system>\n", "topo.xml");
  EXPECT_EQ(root.line, 2);
  EXPECT_EQ(root.children[0].line, 3);
  EXPECT_EQ(root.children[0].children[0].line, 5);
}

TEST(XmlParse, KeepsAttributesInDocumentOrder) {
  Element root = parse("<pci busid=\"0000:17:00.0\" class=\"0x060400\"/>", "topo.xml");
  ASSERT_EQ(root.attributes.size(), 2u);
  EXPECT_EQ(root.attributes[0].first, "busid");
  EXPECT_EQ(root.attributes[1].first, "class");
  EXPECT_EQ(*root.attribute("class"), "0x060400");
}

TEST(XmlParse, AttributeIsNullWhenAbsent) {
  Element root = parse("<pci busid=\"0000:17:00.0\"/>", "topo.xml");
  EXPECT_EQ(root.attribute("class"), nullptr);
}

TEST(XmlParse, AcceptsSingleQuotedValuesHoldingDoubleQuotes) {
  Element root = parse("<net name='say \"hi\"'/>", "topo.xml");
  EXPECT_EQ(*root.attribute("name"), "say \"hi\"");
}

TEST(XmlParse, DecodesThePredefinedEntities) {
  Element root = parse("<a v=\"&amp;&lt;&gt;&quot;&apos;\"/>", "topo.xml");
  EXPECT_EQ(*root.attribute("v"), "&<>\"'");
}

TEST(XmlParse, DecodesDecimalAndHexCharacterReferences) {
  Element root = parse("<a v=\"&#65;&#x42;&#xe9;\"/>", "topo.xml");
  EXPECT_EQ(*root.attribute("v"), "AB\xC3\xA9");
}

TEST(XmlParse, IgnoresTextContent) {
  Element root = parse("<system>some text<cpu/>more text</system>", "topo.xml");
  EXPECT_EQ(root.children.size(), 1u);
}

TEST(XmlParse, AcceptsNestingOf64Levels) {
  EXPECT_NO_THROW(parse(nested(kMaxDepth), "topo.xml"));
}

TEST(XmlParse, ErrorsAreUsageErrors) {
  EXPECT_EQ(parse_error("<system>").code(), ExitCode::kUsage);
}

TEST(XmlParse, UnclosedElementNamesWhereItOpened) {
  Error e = parse_error("<system>\n  <pci busid=\"0000:17:00.0\">\n    <gpu/>\n");
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "topo.xml:3: unexpected end of file: <pci> opened at line 2 is not closed",
                      e.what());
}

TEST(XmlParse, MismatchedClosingTagNamesBothTags) {
  Error e = parse_error("<system>\n<pci>\n</gpu>\n</system>\n");
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "topo.xml:3: closing tag </gpu> does not match <pci> opened at line 2",
                      e.what());
}

TEST(XmlParse, RepeatedAttributeIsRejected) {
  Error e =
      parse_error("<system>\n<pci busid=\"0000:17:00.0\"\n busid=\"0000:18:00.0\"/>\n</system>");
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "topo.xml:3: attribute \"busid\" given twice",
                      e.what());
}

TEST(XmlParse, EmptyDocumentIsRejected) {
  Error e = parse_error("");
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "topo.xml:1: empty document: expected a root element",
                      e.what());
}

TEST(XmlParse, DocumentOfOnlyACommentIsEmpty) {
  Error e = parse_error("<?xml version=\"1.0\"?>\n<!-- nothing -->\n");
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "topo.xml:2: empty document", e.what());
}

TEST(XmlParse, SecondRootElementIsRejected) {
  Error e = parse_error("<system/>\n<system/>\n");
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "topo.xml:2: unexpected '<' after the root element",
                      e.what());
}

TEST(XmlParse, TextAfterTheRootIsRejected) {
  Error e = parse_error("<system></system>\ngarbage");
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "topo.xml:2: unexpected 'g' after the root element",
                      e.what());
}

TEST(XmlParse, FileCutInsideATagNamesTheTag) {
  Error e = parse_error("<system>\n  <pci busid=\"0000:17:00.0\" class=");
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "topo.xml:2: unexpected end of file: the <pci> tag opened at line 2",
                      e.what());
}

TEST(XmlParse, FileCutInsideAValueNamesTheAttribute) {
  Error e = parse_error("<system>\n  <pci busid=\"0000:17");
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "topo.xml:2: unexpected end of file: the value of attribute \"busid\"",
                      e.what());
}

TEST(XmlParse, UnclosedCommentIsRejected) {
  Error e = parse_error("<system>\n<!-- never closed\n</system>\n");
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "a comment opened at line 2 is not closed", e.what());
}

TEST(XmlParse, UnquotedValueIsRejected) {
  Error e = parse_error("<pci busid=0000:17:00.0/>");
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "topo.xml:1: expected a quote (\" or ') to open the value of attribute "
                      "\"busid\", found '0'",
                      e.what());
}

TEST(XmlParse, AttributesWithoutSpaceBetweenThemAreRejected) {
  Error e = parse_error("<pci busid=\"0000:17:00.0\"class=\"0x060400\"/>");
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "expected whitespace, '>' or '/>' in the <pci> tag",
                      e.what());
}

TEST(XmlParse, LessThanInsideAValueIsRejected) {
  Error e = parse_error("<a v=\"1<2\"/>");
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "'<' in the value of attribute \"v\"", e.what());
}

TEST(XmlParse, UnknownEntityIsRejected) {
  Error e = parse_error("<a\n v=\"&nbsp;\"/>");
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "topo.xml:2: unknown entity &nbsp;", e.what());
}

TEST(XmlParse, BareAmpersandIsRejected) {
  Error e = parse_error("<a v=\"R&D\"/>");
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "does not start a reference such as &amp;", e.what());
}

TEST(XmlParse, CharacterReferenceToNulIsRejected) {
  Error e = parse_error("<a v=\"&#0;\"/>");
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "character reference &#0;", e.what());
}

TEST(XmlParse, DoctypeIsRejected) {
  Error e = parse_error("<!DOCTYPE system>\n<system/>");
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "topo.xml:1: unsupported markup '<!'", e.what());
}

TEST(XmlParse, NestingDeeperThan64IsRejected) {
  Error e = parse_error(nested(kMaxDepth + 1));
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "<a> is nested deeper than 64 elements", e.what());
}

}  // namespace
}  // namespace commtool::topo::xml
