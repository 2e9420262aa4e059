from verifiers.parsers.parser import Parser
from verifiers.parsers.think_parser import MaybeThinkParser, ThinkParser
from verifiers.parsers.xml_parser import XMLParser

__all__ = ["MaybeThinkParser", "Parser", "ThinkParser", "XMLParser"]
